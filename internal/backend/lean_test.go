package backend

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aot-loop/aot/internal/agent"
	"github.com/aot-loop/aot/internal/prompt"
)

// The aot binary calls the model APIs with net/http: the providers' SDKs
// tripled its size and start time, so neither may come back through any
// package aot links.
func TestAotLinksNoProviderSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/aot-loop/aot/cmd/aot").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps printed %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/openai/") || strings.HasPrefix(p, "github.com/anthropics/") {
			t.Errorf("cmd/aot links %s", p)
		}
	}
}

// maxAotBytes is the size bin/aot must stay under (docs/PERFORMANCE.md).
const maxAotBytes = 30 << 20

func TestAotBinaryUnder30MB(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "aot")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/aot-loop/aot/cmd/aot").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= maxAotBytes {
		t.Errorf("bin/aot is %.1f MB, want under %d MB", float64(fi.Size())/(1<<20), maxAotBytes>>20)
	}
}

// What the SDKs used to absorb, the net/http clients must too: a local
// server's base_url with a trailing slash, an error body whose "error" is a
// bare string (Ollama's shape), and a credit error told apart by its text.
func TestLLMClientsReadOtherServersShapes(t *testing.T) {
	srv := llmServer(t, `{"conversations": [
		{"match": "OLLAMA", "turns": [{"type": "error", "status": 404, "body": {"error": "model \"test-model\" not found, try pulling it first"}}]},
		{"match": "CREDIT", "turns": [{"type": "error", "status": 400,
			"body": {"type": "error", "error": {"type": "invalid_request_error", "message": "Your credit balance is too low to access the Anthropic API."}}}]}]}`)
	log := &llmLog{}
	env := Env{Getenv: func(string) string { return "" }, Prompts: prompt.Renderer{}, Log: func(agent.Task) (io.WriteCloser, error) { return log, nil }}

	a, err := newOpenAI(Spec{Agent: "openai", Model: "test-model", BaseURL: srv.URL() + "/v1/"}, env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(llmCtx(t), judgeTask(t, "OLLAMA"))
	var ae *agent.AttemptError
	if !errors.As(err, &ae) || ae.Kind != agent.KindAgent || !strings.Contains(ae.Reason, `HTTP 404: model "test-model" not found`) {
		t.Errorf("err = %v, want an %s with the status and the server's text", err, agent.KindAgent)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/chat/completions" || reqs[0].Header["authorization"] != "" {
		t.Errorf("requests = %+v, want one to /v1/chat/completions without a key", reqs)
	}

	env.Getenv = func(k string) string { return map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"}[k] }
	a, err = newAnthropic(Spec{Agent: "anthropic", Model: "test-model", BaseURL: srv.URL() + "/"}, env)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Run(llmCtx(t), judgeTask(t, "CREDIT"))
	if err != nil || !r.UsageLimit {
		t.Errorf("Run = %+v, %v; want a usage-limit result", r, err)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].Path != "/v1/messages" || reqs[1].Header["anthropic-version"] == "" {
		t.Errorf("request = %+v, want one to /v1/messages with an anthropic-version", reqs[len(reqs)-1])
	}
}
