package server_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/server"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browserAgent is an exec agent whose atom X works until a file go-X
// appears (at most 40 s), so the test decides when each atom resolves.
const browserAgent = `echo "working on $AOT_ATOM_ID" >&2
i=0; while [ ! -f "go-$AOT_ATOM_ID" ] && [ $i -lt 400 ]; do sleep 0.1; i=$((i+1)); done
touch "$AOT_ATOM_ID.done"
echo '{"success": true, "summary": "did '"$AOT_ATOM_ID"'", "artifacts": ["'"$AOT_ATOM_ID"'.done"], "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01}}'
`

// browser is a headless Chromium tab whose script errors and CSP
// violations are collected.
type browser struct {
	t      *testing.T
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T, ctx context.Context) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		// Never skipped: the dashboard's only check in a real browser.
		t.Fatalf("chromium is not on PATH (apt-get install chromium); the dashboard's browser test needs it (AOT_REQUIRE_BROWSER=%q)", os.Getenv("AOT_REQUIRE_BROWSER"))
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: tctx}
	err = chromedp.Listen(tctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg = fmt.Sprintf("uncaught: %s %s:%d", d.Text, d.URL, d.LineNumber+1)
			if d.Exception != nil && d.Exception.Description != "" {
				msg += ": " + d.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			// A violation of the Content-Security-Policy, or a script error.
			if e := ev.Entry; e.Level == cdplog.EntryLevelError && (e.Source == cdplog.EntrySourceSecurity || e.Source == cdplog.EntrySourceJavascript) {
				msg = fmt.Sprintf("%s: %s %s", e.Source, e.Text, e.URL)
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(tctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("log domain: %v", err)
	}
	return b
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v%s", what, err, b.pageErrors())
	}
}

// until waits for a JavaScript expression to be true in the page.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById('app').innerText.slice(0, 2000)`))
		b.t.Fatalf("waiting until %s (%s): %v\nthe page shows:\n%s%s", what, expr, err, text, b.pageErrors())
	}
}

func (b *browser) eval(expr string) any {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func (b *browser) pageErrors() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) == 0 {
		return ""
	}
	return "\nerrors in the page:\n" + strings.Join(b.errors, "\n")
}

// screenshot saves the page as AOT_SCREENSHOTS/name.png when that
// variable names a folder (make screenshots sets it to docs/).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("AOT_SCREENSHOTS")
	if dir == "" {
		return
	}
	b.eval(`window.scrollTo(0, 0)`)
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// colorScheme makes the page see prefers-color-scheme: scheme.
func (b *browser) colorScheme(scheme string) {
	b.t.Helper()
	feat := []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: feat}); err != nil {
		b.t.Fatalf("emulating %s: %v", scheme, err)
	}
}

// noHorizontalScroll checks that the page fits a phone's width.
func (b *browser) noHorizontalScroll(page string) {
	b.t.Helper()
	v := b.eval(`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`).([]any)
	if w := v[0].(float64); w > 375 {
		b.t.Errorf("%s at 375 px: the page is %v px wide (it scrolls sideways)", page, w)
	}
}

func TestTheDashboardShowsARunningLoopLiveAndItsButtonsPauseResumeAndStopItAfterAConfirmation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := start(t, "")
	if err := os.WriteFile(filepath.Join(h.ws, "browser-agent.sh"), []byte(browserAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	id := h.create("B1", "B2", "B3")
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "sh " + filepath.Join(h.ws, "browser-agent.sh")}, &out); code != 202 {
		t.Fatalf("start: %d %v", code, out)
	}
	h.waitFor("B1 runs", func() bool {
		s := h.loop(id)
		return len(s.Running) == 1 && s.Running[0].Atom == "B1"
	})
	release := func(atom string) {
		if err := os.WriteFile(filepath.Join(h.ws, "go-"+atom), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { release("B1"); release("B2"); release("B3") })

	b := newBrowser(t, ctx)
	row := fmt.Sprintf(`tr.loop[data-loop=%q]`, id)
	rowIs := func(status string) string {
		return fmt.Sprintf(`document.querySelector('%s[data-status=%q]') !== null`, row, status)
	}
	progress := func(text string) string {
		return fmt.Sprintf(`(document.querySelector('%s [data-role=progress]') || {}).textContent?.startsWith(%q)`, row, text)
	}

	// Without the token the page says where to get it.
	b.do("opening the dashboard without the token", chromedp.Navigate(h.base+"/"))
	b.until("the page asks for the printed URL", `!document.getElementById('banner').hidden && document.getElementById('banner').textContent.includes('open the URL that aot serve printed')`)

	// The token URL signs the browser in and shows the loop running.
	b.do("opening the token URL", chromedp.Navigate(h.srv.URL()))
	b.until("the row shows the running loop", rowIs("running")+" && "+progress("0 / 3 done · 0%"))
	if got := b.eval(`location.search`); got != "" {
		t.Errorf("the token stays in the address bar: %q", got)
	}
	if got := b.eval(`document.querySelector('#live').dataset.state`); got != "live" {
		t.Errorf("the stream indicator says %v", got)
	}

	// An atom resolves: the row follows without a reload.
	b.eval(`window.__sameDocument = true`)
	release("B1")
	b.until("the row shows B1 resolved", progress("1 / 3 done · 33%"))
	h.waitFor("B2 runs", func() bool {
		s := h.loop(id)
		return len(s.Running) == 1 && s.Running[0].Atom == "B2"
	})
	b.until("the row shows an agent running", fmt.Sprintf(`document.querySelector('%s [data-role=agents]').textContent === '1'`, row))

	// Pause, then resume, with the row's buttons.
	b.do("clicking Pause", chromedp.Click(chromedp.CSS(row+` button[data-action="pause"]`)))
	b.until("the row shows the loop paused", rowIs("paused"))
	if s := h.loop(id); s.Status != "paused" || !s.Engine.Paused {
		t.Fatalf("the server says %q (paused %v) after the Pause button", s.Status, s.Engine.Paused)
	}
	b.do("clicking Resume", chromedp.Click(chromedp.CSS(row+` button[data-action="resume"]`)))
	b.until("the row shows the loop running again", rowIs("running"))
	if s := h.loop(id); s.Status != "running" || s.Engine.Paused {
		t.Fatalf("the server says %q (paused %v) after the Resume button", s.Status, s.Engine.Paused)
	}

	// The loop's page: the graph, the running agent with its live output,
	// the checklist and the costs.
	b.do("opening the loop's page", chromedp.Click(chromedp.CSS(row+` a.loop-title`)))
	b.until("the loop page shows the graph", `document.querySelector('[data-panel=graph] svg') !== null`)
	b.until("the loop page tails B2's output", `[...document.querySelectorAll('.tail-out')].some(p => p.textContent.includes('working on B2'))`)
	b.until("the agent's elapsed time ticks", `document.querySelector('.agent .elapsed') !== null`)
	b.until("the checklist lists the base case", `document.querySelectorAll('[data-panel=checklist] li.check').length === 3`)
	b.until("the costs list B1", `[...document.querySelectorAll('[data-panel=costs] td')].some(td => td.textContent === 'B1')`)
	b.until("the journal shows the resume", `document.querySelector('[data-panel=journal] .ev-resume') !== null`)
	b.do("a phone-sized screen", chromedp.EmulateViewport(375, 812))
	b.until("the page lays out at 375 px", `document.documentElement.clientWidth === 375`)
	b.noHorizontalScroll("the loop page")
	b.do("a desktop screen", chromedp.EmulateViewport(1280, 900))
	b.do("back to the list", chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	b.until("the list is back", rowIs("running"))

	// Stop asks first: Cancel keeps the loop running, the confirmation stops it.
	b.do("clicking Stop", chromedp.Click(chromedp.CSS(row+` button[data-action="stop"]`)))
	b.until("Stop asks to confirm", fmt.Sprintf(`document.querySelector('%s button[data-action="confirm-stop"]') !== null && document.querySelector('%s button[data-action="pause"]') === null`, row, row))
	if s := h.loop(id); s.Status != "running" || !s.Engine.Running {
		t.Fatalf("one click on Stop acted at once: %q (engine running %v)", s.Status, s.Engine.Running)
	}
	b.do("clicking Cancel", chromedp.Click(chromedp.CSS(row+` button[data-action="cancel"]`)))
	b.until("Pause is back", fmt.Sprintf(`document.querySelector('%s button[data-action="pause"]') !== null`, row))
	b.do("clicking Stop again", chromedp.Click(chromedp.CSS(row+` button[data-action="stop"]`)))
	b.do("confirming", chromedp.Click(chromedp.CSS(row+` button[data-action="confirm-stop"]`)))
	b.until("the row shows the loop stopped by a person", rowIs("user_exit"))
	if s := h.loop(id); s.Status != "user_exit" || s.Engine.Running {
		t.Fatalf("the server says %q (engine running %v) after the Stop button", s.Status, s.Engine.Running)
	}
	if got := b.eval(`window.__sameDocument === true`); got != true {
		t.Error("the page was reloaded: the dashboard should update in place")
	}
	b.do("a phone-sized screen", chromedp.EmulateViewport(375, 812))
	b.until("the page lays out at 375 px", `document.documentElement.clientWidth === 375`)
	b.noHorizontalScroll("the list")
	if errs := b.pageErrors(); errs != "" {
		t.Error(errs)
	}
}

func TestTheListSearchesFiltersAndSortsAndACompletedLoopReadsDone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Two workspaces: the second holds a completed loop whose OR group set
	// a failed choice aside, stopped with a reason of several lines.
	other := t.TempDir()
	os.MkdirAll(filepath.Join(other, ".claude"), 0o755)
	longReason := "verification passed: every check holds and the merged work landed on the branch aot/loop after git merge --no-ff --no-edit aot/attempt-A2b-1"
	st := strings.Replace(completedWithAFailedChoice, `stop_reason: "base case passed: every check of the checklist holds"`,
		`stop_reason: "`+longReason+`\n  git -C /tmp/ws worktree remove --force /tmp/ws/.claude/aot-loop/worktrees/A2b-1\n  exit status 1"`, 1)
	if err := os.WriteFile(filepath.Join(other, ".claude", "aot-loop-state.md"), []byte(st), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, "", func(o *server.Options) { o.Workspaces = append(o.Workspaces, other) })
	mk := func(title, goal string) string {
		var s summary
		if code := h.do("POST", "/api/loops", map[string]any{
			"title": title, "goal": goal, "checks": []map[string]string{{"type": "file", "value": "x.done"}},
			"atoms": []map[string]any{{"id": "X", "description": "make x.done"}},
		}, &s); code != 201 {
			t.Fatalf("create %s: %d", title, code)
		}
		return s.LoopID
	}
	alpha := mk("alpha release notes", "write the notes for the alpha")
	zulu := mk("zulu cleanup", "remove the dead code")
	var list struct{ Loops []summary }
	h.do("GET", "/api/loops", nil, &list)
	if len(list.Loops) != 3 {
		t.Fatalf("loops: %+v", list.Loops)
	}
	var done string
	for _, l := range list.Loops {
		if l.Status == "completed" {
			done = l.LoopID
		}
	}

	b := newBrowser(t, ctx)
	b.do("a desktop screen", chromedp.EmulateViewport(1400, 900))
	b.do("opening the dashboard", chromedp.Navigate(h.srv.URL()))
	rows := `[...document.querySelectorAll('tbody tr.loop')].map(r => r.dataset.loop).join(',')`
	b.until("three rows", `document.querySelectorAll('tbody tr.loop').length === 3`)
	row := func(id string) string { return fmt.Sprintf(`document.querySelector('tr.loop[data-loop=%q]')`, id) }

	// The completed loop: 100%, no Start, its reason on one line cut at a
	// word, the whole of it on opening.
	if got := b.eval(row(done) + `.querySelector('[data-role=progress]').textContent`); got != "3 / 3 done · 100%" {
		t.Errorf("the completed loop's progress reads %q", got)
	}
	if got := b.eval(row(done) + `.querySelector('button[data-action]')`); got != nil {
		t.Errorf("a completed loop offers %v", got)
	}
	if got := b.eval(row(alpha) + `.querySelector('button[data-action]').dataset.action`); got != "start" {
		t.Errorf("a loop not started offers %v", got)
	}
	summaryText := b.eval(row(done) + `.querySelector('[data-role=reason] summary').textContent`).(string)
	if strings.Contains(summaryText, "git -C") || !strings.HasSuffix(summaryText, "…") || !strings.HasPrefix(longReason, strings.TrimSuffix(summaryText, "…")) {
		t.Errorf("the stop reason's line: %q", summaryText)
	}
	if got := b.eval(row(done) + `.querySelector('[data-role=reason] summary').getBoundingClientRect().height < 40`); got != true {
		t.Error("the stop reason takes more than one line")
	}
	b.screenshot("dashboard-list")
	b.do("opening the reason", chromedp.Click(chromedp.CSS(`tr.loop[data-loop="`+done+`"] [data-role=reason] summary`)))
	if got := b.eval(row(done) + `.querySelector('[data-role=reason] .full').innerText`).(string); !strings.Contains(got, "exit status 1") {
		t.Errorf("the whole reason: %q", got)
	}
	for _, f := range []string{"workspace", "id", "started", "elapsed", "iteration"} {
		if got := b.eval(row(done) + `.querySelector('[data-role=` + f + `]') !== null`); got != true {
			t.Errorf("the row has no %s", f)
		}
	}
	if got := b.eval(row(done) + `.querySelector('[data-role=iteration]').textContent`); got != "3 / 20" {
		t.Errorf("the completed loop's iteration: %v", got)
	}

	// Search: title, goal, workspace and id.
	search := func(q string) {
		b.eval(fmt.Sprintf(`(() => { const i = document.querySelector('[data-role=search]'); i.value = %q; i.dispatchEvent(new Event('input')); })()`, q))
	}
	pick := func(role, v string) {
		b.eval(fmt.Sprintf(`(() => { const s = document.querySelector('[data-role=%s]'); s.value = %q; s.dispatchEvent(new Event('change')); })()`, role, v))
	}
	search("dead code")
	b.until("the goal search finds zulu", rows+` === '`+zulu+`'`)
	search("ALPHA")
	b.until("the title search finds alpha", rows+` === '`+alpha+`'`)
	search(done[len(done)-6:])
	b.until("the id search finds the completed loop", rows+` === '`+done+`'`)
	search("")
	b.until("all three again", `document.querySelectorAll('tbody tr.loop').length === 3`)
	// Filters: status and workspace.
	pick("status-filter", "completed")
	b.until("the status filter", rows+` === '`+done+`'`)
	pick("status-filter", "")
	pick("workspace-filter", h.ws)
	b.until("the workspace filter", `document.querySelectorAll('tbody tr.loop').length === 2 && !`+rows+`.includes('`+done+`')`)
	pick("workspace-filter", "")
	// Sort by name.
	pick("sort", "name")
	b.until("sorted by name", `[...document.querySelectorAll('tbody tr.loop .loop-title')].map(a => a.textContent).join('|') === 'alpha release notes|first goal line and a second line|zulu cleanup'`)
	// The filters are kept when coming back from a loop's page.
	pick("status-filter", "created")
	b.do("a loop's page", chromedp.Evaluate[chromedp.Void](`location.hash = '#/loops/`+alpha+`'`))
	b.until("the loop page", `document.querySelector('.loop-head h1') !== null`)
	b.do("back", chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	b.until("the filter kept", `document.querySelectorAll('tbody tr.loop').length === 2 && document.querySelector('[data-role=status-filter]').value === 'created'`)

	b.do("a phone-sized screen", chromedp.EmulateViewport(375, 812))
	b.until("the page lays out at 375 px", `document.documentElement.clientWidth === 375`)
	b.noHorizontalScroll("the list")

	// The completed loop's page: no Start; its failed OR choice is shown
	// as such in the costs, not as pending.
	b.do("a desktop screen", chromedp.EmulateViewport(1280, 900))
	b.do("the completed loop's page", chromedp.Evaluate[chromedp.Void](`location.hash = '#/loops/`+done+`'`))
	b.until("the costs list A2 as a failed choice", `[...document.querySelectorAll('[data-panel=costs] tr')].some(tr => tr.querySelector('td')?.textContent === 'A2' && tr.querySelector('[data-role=atom-status]').textContent === 'failed choice')`)
	b.until("the progress reads 100%", `document.querySelector('.loop-head [data-role=progress]')?.textContent === '3 / 3 done · 100%'`)
	if got := b.eval(`[...document.querySelectorAll('.controls .ctl-box')].filter(b => !b.hidden).map(b => b.querySelector('h3').textContent).join(',')`); got != "" {
		t.Errorf("a completed loop offers %v", got)
	}
	if errs := b.pageErrors(); errs != "" {
		t.Error(errs)
	}
}

// chattyAgent prints 300 lines at once, then a line every 0.2 s until a
// file go-X appears (at most 40 s).
const chattyAgent = `i=1; while [ $i -le 300 ]; do echo "early line $i of $AOT_ATOM_ID" >&2; i=$((i+1)); done
i=0; while [ ! -f "go-$AOT_ATOM_ID" ] && [ $i -lt 200 ]; do echo "late line $i" >&2; sleep 0.2; i=$((i+1)); done
touch "$AOT_ATOM_ID.done"
echo '{"success": true, "summary": "did '"$AOT_ATOM_ID"'", "artifacts": ["'"$AOT_ATOM_ID"'.done"], "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01}}'
`

func TestTheLoopPageFollowsATailOpenedLateOpensAnAtomFromTheGraphAndIsDarkInDarkMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := start(t, "")
	if err := os.WriteFile(filepath.Join(h.ws, "chatty.sh"), []byte(chattyAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a long description that a person wants to read whole, ", 8) + "and its end"
	var created summary
	if code := h.do("POST", "/api/loops", map[string]any{
		"title": "a chatty loop", "goal": "make the files", "background": "b", "deliverables": "d", "definition_of_done": "the files exist",
		"checks":      []map[string]string{{"type": "file", "value": "T1.done"}, {"type": "file", "value": "T2.done"}},
		"atoms":       []map[string]any{{"id": "T1", "description": long}, {"id": "T2", "description": "two", "depends_on": []string{"T1"}}},
		"constraints": map[string]any{"max_parallel_agents": 1, "max_cost_usd": 5},
	}, &created); code != 201 {
		t.Fatalf("create: %d", code)
	}
	id := created.LoopID
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "sh " + filepath.Join(h.ws, "chatty.sh")}, &out); code != 202 {
		t.Fatalf("start: %d %v", code, out)
	}
	release := func(atom string) {
		if err := os.WriteFile(filepath.Join(h.ws, "go-"+atom), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { release("T1"); release("T2") })
	// T1 printed its 300 lines before the page opens.
	h.waitFor("T1 printed", func() bool {
		var o struct{ Data string }
		h.do("GET", "/api/loops/"+id+"/output?atom=T1&role=worker&attempt=1", nil, &o)
		return strings.Contains(o.Data, "early line 300")
	})

	b := newBrowser(t, ctx)
	b.colorScheme("dark")
	b.do("a desktop screen", chromedp.EmulateViewport(1400, 1000))
	b.do("signing in", chromedp.Navigate(h.srv.URL()))
	b.until("the list", `document.querySelector('tr.loop') !== null`)
	b.do("the loop's page", chromedp.Evaluate[chromedp.Void](`location.hash = '#/loops/`+id+`'`))
	tail := `document.querySelector('.tail[data-tail^="T1"] .tail-out')`
	atEnd := `(p => p && p.scrollHeight > p.clientHeight + 50 && p.scrollTop + p.clientHeight >= p.scrollHeight - 4)(` + tail + `)`
	b.until("the tail shows what T1 printed, scrolled to its end", tail+`?.textContent.includes('early line 300') && `+atEnd)
	// The page redraws its agents (a pause and a resume): the tail stays
	// at the end and goes on following.
	for _, action := range []string{"pause", "resume"} {
		if code := h.do("POST", "/api/loops/"+id+"/"+action, map[string]any{}, &out); code != 200 {
			t.Fatalf("%s: %d %v", action, code, out)
		}
		b.until("the page shows the "+action, `document.querySelector('.loop-head [data-role=status]')?.textContent === '`+map[string]string{"pause": "paused", "resume": "running"}[action]+`'`)
	}
	b.until("the tail follows new lines", tail+`.textContent.includes('late line 15') && `+atEnd)
	// The output is searchable: the lines that hold the text, numbered.
	b.eval(`(() => { const i = document.querySelector('.tail[data-tail^="T1"] .tail-find'); i.value = 'EARLY LINE 29'; i.dispatchEvent(new Event('input')); })()`)
	b.until("the search shows the 11 lines", `document.querySelector('.tail[data-tail^="T1"] [data-role=found]').textContent === '11 lines'`)
	if got := b.eval(`document.querySelector('.tail[data-tail^="T1"] [data-role=hits]').textContent.split('\n')[0]`); got != "   29  early line 29 of T1" {
		t.Errorf("the first line found: %q", got)
	}

	// Dark mode throughout: the page and the graph.
	b.until("the graph is drawn", `document.querySelector('[data-panel=graph] g.node[data-atom="T1"]') !== null`)
	white := "rgb(255, 255, 255)"
	for what, expr := range map[string]string{
		"the page":             `getComputedStyle(document.body).backgroundColor`,
		"the graph's box":      `getComputedStyle(document.querySelector('.graph')).backgroundColor`,
		"the graph's backdrop": `getComputedStyle(document.querySelector('.graph svg > rect')).fill`,
		"the panels":           `getComputedStyle(document.querySelector('.panel')).backgroundColor`,
		"a pending atom's box": `getComputedStyle(document.querySelector('g.node[data-atom="T2"] rect')).fill`,
	} {
		if got := b.eval(expr); got == white {
			t.Errorf("%s is white in dark mode", what)
		}
	}
	b.screenshot("dashboard-loop-dark")
	// The same page in light mode: the same layout (every panel where it
	// was, as wide), other colours.
	columns := `JSON.stringify([...document.querySelectorAll('.loop-head, .panel, .graph')].map(e => { const r = e.getBoundingClientRect(); return [e.className, Math.round(r.x), Math.round(r.width)]; }))`
	shot := func() image.Image {
		t.Helper()
		b.eval(`window.scrollTo(0, 0)`)
		sctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
		defer cancel()
		data, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		img, err := pngDecode(data)
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		return img
	}
	darkCols, darkShot, darkBody := b.eval(columns), shot(), b.eval(`getComputedStyle(document.body).backgroundColor`)
	b.colorScheme("light")
	b.until("the light scheme applies", `getComputedStyle(document.body).backgroundColor !== `+fmt.Sprintf("%q", darkBody))
	lightCols, lightShot := b.eval(columns), shot()
	if darkCols != lightCols {
		t.Errorf("the layout differs between the schemes:\ndark  %v\nlight %v", darkCols, lightCols)
	}
	if darkShot.Bounds() != lightShot.Bounds() || sameCorner(darkShot, lightShot) {
		t.Errorf("the dark screenshot (%v) is not the light one (%v) in other colours", darkShot.Bounds(), lightShot.Bounds())
	}
	b.colorScheme("dark")

	// A node opens its atom: the whole description and its attempts.
	b.do("clicking T1 in the graph", chromedp.Click(chromedp.CSS(`[data-panel=graph] g.node[data-atom="T1"]`)))
	b.until("the atom panel shows T1", `!document.querySelector('[data-panel=atom]').hidden && document.querySelector('[data-role=atom-id]')?.textContent === 'T1'`)
	if got := b.eval(`document.querySelector('[data-panel=atom] [data-role=description]').textContent`); got != long {
		t.Errorf("the description is cut: %q", got)
	}
	b.until("T1's running attempt is listed with its timeline", `[...document.querySelectorAll('[data-panel=atom] table.attempts td')].some(td => td.textContent.startsWith('running')) && document.querySelector('[data-panel=atom] [data-role=timeline] .bar.out-running') !== null`)
	// Bounds and what is left.
	b.until("the cost bound", `document.querySelector('[data-bound=max_cost_usd] [data-role=left]')?.textContent === '$5.00 left'`)

	// T1 finishes: the costs table follows the journal as the graph does.
	costStatus := func(atom string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('[data-panel=costs] tr')].find(tr => tr.querySelector('td')?.textContent === %q)?.querySelector('[data-role=atom-status]')?.textContent`, atom)
	}
	b.until("the costs show T1 running", costStatus("T1")+` === 'in_progress'`)
	released := time.Now()
	release("T1")
	b.until("the costs show T1 resolved", costStatus("T1")+` === 'resolved'`)
	if d := time.Since(released); d > 8*time.Second {
		t.Errorf("the costs table showed T1 resolved %v after it finished", d)
	}
	b.until("the attempt is shown ok", `document.querySelector('[data-panel=atom] [data-role=timeline] .bar.out-ok') !== null`)
	// The chart: the spend rises with T1's cost.
	b.until("the spend chart", `document.querySelector('[data-panel=chart] polyline.spend')?.getAttribute('points').split(' ').length >= 2 && document.querySelector('[data-panel=chart] .key.spend').textContent === 'spend $0.01'`)
	// The loop's timeline: a lane per atom, T1's attempt ok, T2's running.
	b.until("the timeline has T1 ok and T2 running", `document.querySelector('[data-panel=timeline] .lane[data-lane="T1"] .bar.out-ok') !== null && document.querySelector('[data-panel=timeline] .lane[data-lane="T2"] .bar.out-running') !== null`)
	b.do("clicking T2's lane", chromedp.Click(chromedp.CSS(`[data-panel=timeline] .lane[data-lane="T2"]`)))
	b.until("the atom panel shows T2", `document.querySelector('[data-role=atom-id]')?.textContent === 'T2'`)
	b.colorScheme("light")
	b.screenshot("dashboard-loop")
	if errs := b.pageErrors(); errs != "" {
		t.Error(errs)
	}
}

func pngDecode(data []byte) (image.Image, error) { return png.Decode(bytes.NewReader(data)) }

// sameCorner reports whether two screenshots have the same colour at the
// page's top left corner (the page's background).
func sameCorner(a, b image.Image) bool {
	p := a.Bounds().Min.Add(image.Pt(2, 2))
	r1, g1, b1, _ := a.At(p.X, p.Y).RGBA()
	r2, g2, b2, _ := b.At(p.X, p.Y).RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2
}
