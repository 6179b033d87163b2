package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
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

// noHorizontalScroll checks that the page fits a phone's width.
func (b *browser) noHorizontalScroll(page string) {
	b.t.Helper()
	v := b.eval(`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`).([]any)
	if w := v[0].(float64); w > 375 {
		b.t.Errorf("%s at 375 px: the page is %v px wide (it scrolls sideways)", page, w)
	}
}

func TestTheDashboardShowsARunningLoopLiveAndItsButtonsPauseResumeAndStopIt(t *testing.T) {
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
	card := fmt.Sprintf(`article.card[data-loop=%q]`, id)
	cardIs := func(status string) string {
		return fmt.Sprintf(`document.querySelector('section[data-group=%q] %s[data-status=%q]') !== null`, status, card, status)
	}
	progress := func(text string) string {
		return fmt.Sprintf(`(document.querySelector('%s [data-role=progress]') || {}).textContent?.startsWith(%q)`, card, text)
	}

	// Without the token the page says where to get it.
	b.do("opening the dashboard without the token", chromedp.Navigate(h.base+"/"))
	b.until("the page asks for the printed URL", `!document.getElementById('banner').hidden && document.getElementById('banner').textContent.includes('open the URL that aot serve printed')`)

	// The token URL signs the browser in and shows the loop running.
	b.do("opening the token URL", chromedp.Navigate(h.srv.URL()))
	b.until("the card shows the running loop", cardIs("running")+" && "+progress("0 / 3 resolved"))
	if got := b.eval(`location.search`); got != "" {
		t.Errorf("the token stays in the address bar: %q", got)
	}
	if got := b.eval(`document.querySelector('#live').dataset.state`); got != "live" {
		t.Errorf("the stream indicator says %v", got)
	}

	// An atom resolves: the card follows without a reload.
	b.eval(`window.__sameDocument = true`)
	release("B1")
	b.until("the card shows B1 resolved", progress("1 / 3 resolved"))
	h.waitFor("B2 runs", func() bool {
		s := h.loop(id)
		return len(s.Running) == 1 && s.Running[0].Atom == "B2"
	})
	b.until("the card shows an agent running", fmt.Sprintf(`document.querySelector('%s [data-role=agents]').textContent === '1'`, card))

	// Pause, then resume, with the card's buttons.
	b.do("clicking Pause", chromedp.Click(chromedp.CSS(card+` button[data-action="pause"]`)))
	b.until("the card shows the loop paused", cardIs("paused"))
	if s := h.loop(id); s.Status != "paused" || !s.Engine.Paused {
		t.Fatalf("the server says %q (paused %v) after the Pause button", s.Status, s.Engine.Paused)
	}
	b.do("clicking Resume", chromedp.Click(chromedp.CSS(card+` button[data-action="resume"]`)))
	b.until("the card shows the loop running again", cardIs("running"))
	if s := h.loop(id); s.Status != "running" || s.Engine.Paused {
		t.Fatalf("the server says %q (paused %v) after the Resume button", s.Status, s.Engine.Paused)
	}

	// The loop's page: the graph, the running agent with its live output,
	// the checklist and the costs.
	b.do("opening the loop's page", chromedp.Click(chromedp.CSS(card+` a.card-title`)))
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
	b.do("back to the cards", chromedp.Evaluate[chromedp.Void](`location.hash = '#/'`))
	b.until("the cards are back", cardIs("running"))

	// Stop.
	b.do("clicking Stop", chromedp.Click(chromedp.CSS(card+` button[data-action="stop"]`)))
	b.until("the card shows the loop stopped by a person", cardIs("user_exit"))
	if s := h.loop(id); s.Status != "user_exit" || s.Engine.Running {
		t.Fatalf("the server says %q (engine running %v) after the Stop button", s.Status, s.Engine.Running)
	}
	if got := b.eval(`window.__sameDocument === true`); got != true {
		t.Error("the page was reloaded: the dashboard should update in place")
	}
	b.do("a phone-sized screen", chromedp.EmulateViewport(375, 812))
	b.until("the page lays out at 375 px", `document.documentElement.clientWidth === 375`)
	b.noHorizontalScroll("the cards page")
	if errs := b.pageErrors(); errs != "" {
		t.Error(errs)
	}
}
