// Command serve measures aot serve under load: 100 loops registered, 20 of
// them running with a scripted exec agent, 50 SSE clients on the all-loops
// stream. It reports the API's latency (p50/p99) and the delay from a
// journal event (its time stamp, written by the engine) to its arrival at
// every client, beside a baseline timed in the same run: a GET of
// /api/health, the server's floor.
//
//	go run ./bench/serve [-loops 100] [-running 20] [-clients 50] [-for 20s]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	loops := flag.Int("loops", 100, "loops registered")
	running := flag.Int("running", 20, "loops running")
	clients := flag.Int("clients", 50, "SSE clients")
	dur := flag.Duration("for", 20*time.Second, "how long to measure")
	flag.Parse()
	if err := run(*loops, *running, *clients, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "bench/serve:", err)
		os.Exit(1)
	}
}

type client struct {
	base, token string
}

func (c *client) do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

const agent = `sleep 0.$(( $$ % 5 + 5 ))
touch "$AOT_ATOM_ID.done"
echo '{"success": true, "summary": "ok", "usage": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.001}}'
`

func run(nLoops, nRunning, nClients int, dur time.Duration) error {
	tmp, err := os.MkdirTemp("", "aot-bench-serve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "aot")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/aot").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	ws := filepath.Join(tmp, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(agent), 0o755)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--json", "--workspace", ws, "--token-file", filepath.Join(tmp, "token"))
	srv.Stderr = io.Discard
	out, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		return err
	}
	var hello struct{ URL, Addr string }
	if err := json.NewDecoder(out).Decode(&hello); err != nil {
		return fmt.Errorf("aot serve said nothing: %w", err)
	}
	token := hello.URL[strings.Index(hello.URL, "token=")+6:]
	c := &client{base: "http://" + hello.Addr, token: token}

	// 100 loops of 200 atoms each; 20 of them run.
	var ids []string
	for i := range nLoops {
		var atoms []map[string]any
		for j := range 200 {
			atoms = append(atoms, map[string]any{"id": fmt.Sprintf("A%d", j), "description": "d"})
		}
		code, data, err := c.do("POST", "/api/loops", map[string]any{"title": fmt.Sprint("loop ", i), "goal": "g", "background": "b", "deliverables": "d", "definition_of_done": "c",
			"checks": []map[string]string{{"type": "command", "value": "false"}}, "atoms": atoms,
			"constraints": map[string]any{"max_parallel_agents": 2, "max_iterations": 1000}})
		if err != nil || code != 201 {
			return fmt.Errorf("create: %d %s %v", code, data, err)
		}
		var s struct {
			LoopID string `json:"loop_id"`
		}
		json.Unmarshal(data, &s)
		ids = append(ids, s.LoopID)
	}

	// The SSE clients.
	var mu sync.Mutex
	var delays []time.Duration
	byType := map[string][]time.Duration{}
	received := 0
	for range nClients {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		go func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				now := time.Now()
				var m struct {
					Event struct {
						Time time.Time
						Type string
					} `json:"event"`
				}
				if json.Unmarshal([]byte(line[6:]), &m) == nil && !m.Event.Time.IsZero() {
					mu.Lock()
					delays = append(delays, now.Sub(m.Event.Time))
					byType[m.Event.Type] = append(byType[m.Event.Type], now.Sub(m.Event.Time))
					received++
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids[:nRunning] {
		code, data, err := c.do("POST", "/api/loops/"+id+"/start", map[string]any{"agent": "exec", "agent_command": "sh " + filepath.Join(ws, "agent.sh")})
		if err != nil || code != 202 {
			return fmt.Errorf("start: %d %s %v", code, data, err)
		}
	}
	// The API under that load, beside its floor.
	var health, list, one []time.Duration
	end := time.Now().Add(dur)
	for i := 0; time.Now().Before(end); i++ {
		for _, p := range []struct {
			path string
			into *[]time.Duration
		}{{"/api/health", &health}, {"/api/loops", &list}, {"/api/loops/" + ids[i%nRunning], &one}} {
			t0 := time.Now()
			code, _, err := c.do("GET", p.path, nil)
			if err != nil || code != 200 {
				return fmt.Errorf("GET %s: %d %v", p.path, code, err)
			}
			*p.into = append(*p.into, time.Since(t0))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range ids[:nRunning] {
		c.do("POST", "/api/loops/"+id+"/stop", map[string]any{})
	}
	mu.Lock()
	d := append([]time.Duration{}, delays...)
	n := received
	mu.Unlock()
	fmt.Printf("aot serve: %d loops, %d running, %d SSE clients, %s, %d cores %s/%s\n\n", nLoops, nRunning, nClients, dur, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Println("| measure | p50 | p99 | ratio to the health floor (p50) | samples |")
	fmt.Println("|---|---:|---:|---:|---:|")
	h50 := pct(health, 50)
	row := func(name string, v []time.Duration, ratio bool) {
		r := "-"
		if ratio {
			r = fmt.Sprintf("%.1fx", float64(pct(v, 50))/float64(h50))
		}
		fmt.Printf("| %s | %s | %s | %s | %d |\n", name, ms(pct(v, 50)), ms(pct(v, 99)), r, len(v))
	}
	row("GET /api/health (floor)", health, false)
	row("GET /api/loops (100 loops)", list, true)
	row("GET /api/loops/{id} (running, 200 atoms)", one, true)
	row(fmt.Sprintf("journal event -> each of %d SSE clients", nClients), d, false)
	fmt.Printf("\n%d event deliveries\n", n)
	if os.Getenv("AOT_BENCH_BY_TYPE") != "" {
		for t, v := range byType {
			fmt.Printf("%s: p50 %s p99 %s n %d\n", t, ms(pct(v, 50)), ms(pct(v, 99)), len(v))
		}
	}
	return nil
}

func pct(v []time.Duration, p int) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration{}, v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
