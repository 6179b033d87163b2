package cli

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/aot-loop/aot/internal/dag"
)

// topModel is the full-screen live view of aot top.
type topModel struct {
	opts   *statusOptions
	lv     *liveView
	seen   loopStamp
	logs   map[string]fileStamp // the running attempts' logs as last seen
	err    error                // the last reread's failure; the view shown is older
	now    time.Time
	width  int
	height int
	scroll int // the body's first line shown
	starts []int
}

type topTick time.Time

// topRun shows the live view until q, Ctrl-C or the end of ctx.
func topRun(ctx context.Context, opts *statusOptions) error {
	m := &topModel{opts: opts, width: 80, height: 24}
	if err := m.reread(); err != nil {
		return err
	}
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(opts.IO.In), tea.WithOutput(opts.IO.Out),
		tea.WithoutSignalHandler())
	_, err := p.Run()
	if err != nil && ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
		return nil // Ctrl-C or a signal ended it: a normal end
	}
	return err
}

// reread gathers the view again and notes what it saw of the files.
func (m *topModel) reread() error {
	m.seen = stampLoop(m.opts.Global.StateFile)
	lv, err := gatherLive(m.opts.IO, m.opts.Global, m.opts.Events)
	m.now = m.opts.now()
	if err != nil {
		return err
	}
	m.lv = lv
	m.logs = map[string]fileStamp{}
	for _, a := range lv.Running {
		m.logs[a.LogFile] = stampOf(a.LogFile)
	}
	return nil
}

// changed says whether the files shown changed since the last reread.
func (m *topModel) changed() bool {
	if stampLoop(m.opts.Global.StateFile) != m.seen {
		return true
	}
	for path, st := range m.logs {
		if stampOf(path) != st {
			return true
		}
	}
	return false
}

func (m *topModel) tick() tea.Cmd {
	return tea.Tick(m.opts.Interval, func(t time.Time) tea.Msg { return topTick(t) })
}

func (m *topModel) Init() tea.Cmd { return m.tick() }

func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width > 0 && msg.Height > 0 { // a terminal that tells no size keeps 80x24
			m.width, m.height = msg.Width, msg.Height
		}
	case topTick:
		m.now = m.opts.now()
		if m.changed() {
			m.err = m.reread()
		}
		return m, m.tick()
	case tea.KeyPressMsg:
		body := m.bodyLines()
		page := max(m.bodyHeight()-1, 1)
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		case "up", "k":
			m.scroll--
		case "down", "j":
			m.scroll++
		case "pgup", "b":
			m.scroll -= page
		case "pgdown", "space", "f":
			m.scroll += page
		case "home", "g":
			m.scroll = 0
		case "end", "G":
			m.scroll = len(body)
		case "tab":
			m.scroll = m.nextPanel(+1)
		case "shift+tab":
			m.scroll = m.nextPanel(-1)
		}
		m.scroll = m.clampScroll(len(body))
	}
	return m, nil
}

// nextPanel is the first line of the panel after (or before) the one at
// the top, wrapping around.
func (m *topModel) nextPanel(dir int) int {
	if len(m.starts) == 0 {
		return 0
	}
	cur := 0
	for i, s := range m.starts {
		if s <= m.scroll {
			cur = i
		}
	}
	return m.starts[(cur+dir+len(m.starts))%len(m.starts)]
}

func (m *topModel) bodyHeight() int {
	return max(m.height-len(m.lv.header(m.now))-1, 1)
}

func (m *topModel) clampScroll(lines int) int {
	return max(min(m.scroll, lines-m.bodyHeight()), 0)
}

// bodyLines lays the panels out one after the other and notes where each
// starts.
func (m *topModel) bodyLines() []string {
	var out []string
	m.starts = m.starts[:0]
	for _, p := range m.lv.panels(m.now) {
		m.starts = append(m.starts, len(out))
		out = append(out, topSection.Render("─ "+p.Title+" "+strings.Repeat("─", max(m.width-lipgloss.Width(p.Title)-3, 0))))
		for _, l := range p.Lines {
			out = append(out, " "+l)
		}
	}
	return out
}

func (m *topModel) View() tea.View {
	var b strings.Builder
	w := m.width
	for _, l := range m.lv.header(m.now) {
		b.WriteString(fit(l, w) + "\n")
	}
	body := m.bodyLines()
	m.scroll = m.clampScroll(len(body))
	h := m.bodyHeight()
	for i := m.scroll; i < m.scroll+h; i++ {
		if i < len(body) {
			b.WriteString(fit(body[i], w))
		}
		b.WriteString("\n")
	}
	foot := "q quit  ↑↓/jk scroll  tab next panel"
	if len(body) > h {
		foot += "  " + strconv.Itoa(m.scroll+1) + "-" + strconv.Itoa(min(m.scroll+h, len(body))) + "/" + strconv.Itoa(len(body))
	}
	switch {
	case m.err != nil:
		foot = topBad.Render("cannot reread: "+dag.OneLine(m.err.Error(), 200)) + "  " + foot
	case m.lv.Warnings != "":
		foot = topWait.Render(dag.OneLine(m.lv.Warnings, 200)) + "  " + foot
	}
	b.WriteString(fit(topDim.Render(foot), w))
	v := tea.NewView(b.String())
	v.AltScreen = true
	v.WindowTitle = "aot top"
	return v
}
