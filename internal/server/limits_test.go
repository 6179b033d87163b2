package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aot-loop/aot/internal/server"
)

// What a client may take of the server: a slow or idle client is cut, a
// stream is not, and Ctrl-C ends the streams and the server at once.

// cutWithin sends what to the server on a fresh connection and says how
// long the server took to close it.
func (h *harness) cutWithin(what string) time.Duration {
	h.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, what); err != nil {
		h.t.Fatal(err)
	}
	t0 := time.Now()
	conn.SetReadDeadline(t0.Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		h.t.Fatalf("the server kept the connection for 20 s: %v", err)
	}
	return time.Since(t0)
}

func TestASlowOrIdleClientIsCutAndAStreamIsNot(t *testing.T) {
	h := start(t, "", func(o *server.Options) {
		o.HeaderTimeout, o.BodyTimeout, o.WriteTimeout, o.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	})
	id := h.create("A1")
	host := strings.TrimPrefix(h.base, "http://")
	for _, tc := range []struct{ name, request string }{
		{"headers that never end", "GET /api/loops HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + h.token + "\r\n"},
		{"a body declared and never sent", "POST /api/loops/" + id + "/redirect HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + h.token +
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"reason\": "},
		{"a body declared and never sent, without the token", "POST /api/loops HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 100\r\n\r\n{"},
		{"an idle keep-alive connection", "GET /api/health HTTP/1.1\r\nHost: " + host + "\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if took := h.cutWithin(tc.request); took > 2*time.Second {
				t.Errorf("cut after %s; want about 0.3 to 0.6 s", took)
			}
		})
	}

	// A stream, and a request that reads its body in time, outlast every
	// one of those limits.
	s := h.stream("/api/loops/"+id+"/stream", "")
	time.Sleep(time.Second)
	var out map[string]any
	if code := h.do("POST", "/api/loops/"+id+"/redirect", map[string]any{"reason": "later", "goal": "a later goal"}, &out); code != 200 {
		t.Fatalf("redirect: %d %v", code, out)
	}
	s.next(t, "state", id)
}

func TestCtrlCEndsTheStreamsAndExitsZeroWithinASecond(t *testing.T) {
	ws := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--addr", "127.0.0.1:0", "--token-file", filepath.Join(t.TempDir(), "token"), "--workspace", ws, "--json")
	// (Under -race, a program sleeps 1 s before it exits, unless told not to.)
	cmd.Env = append(os.Environ(), asAOT+"=1", "GORACE=atexit_sleep_ms=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-waited
		}
	})
	var doc struct{ URL, Addr string }
	if err := json.NewDecoder(stdout).Decode(&doc); err != nil {
		t.Fatalf("aot serve --json: %v; stderr: %s", err, stderr.String())
	}
	token := doc.URL[strings.Index(doc.URL, "token=")+len("token="):]
	req, _ := http.NewRequest("GET", "http://"+doc.Addr+"/api/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream: %q %v", line, err)
	}

	t0 := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		took := time.Since(t0)
		if err != nil || took > time.Second {
			t.Errorf("aot serve after Ctrl-C with a stream open: %v after %s; want exit 0 within 1s; stderr: %s", err, took, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("aot serve still runs 10 s after Ctrl-C; stderr: %s", stderr.String())
	}
	if rest, err := io.ReadAll(rd); err != nil {
		t.Errorf("the stream was cut, not ended: %v (after %q)", err, rest)
	}
}
