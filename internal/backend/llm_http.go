package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The two HTTP APIs are called with net/http, not the providers' SDKs: one
// non-streamed POST per attempt is all these backends make, and the SDKs
// tripled the size of the aot binary and its start time (docs/PERFORMANCE.md).

// maxAnswerBytes bounds what is read of an answer.
const maxAnswerBytes = 32 << 20

// llmErrorStatus is an answer with a status other than 2xx, for the
// backend to reduce to an *apiFailure.
type llmErrorStatus struct {
	Status int
	Header http.Header
	Body   []byte
}

func (e *llmErrorStatus) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(string(e.Body)))
}

// llmPost sends in as JSON to url with header and decodes a 2xx answer into
// out. An error status comes back as *llmErrorStatus; the http.Client never
// retries, so the engine's backoff is the only one.
func llmPost(ctx context.Context, url string, header http.Header, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &llmErrorStatus{Status: resp.StatusCode, Header: resp.Header, Body: data}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the answer is not the API's JSON: %w (%.200s)", err, data)
	}
	return nil
}

// llmEndpoint joins base and path with one slash between them.
func llmEndpoint(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + path
}

// llmSchema is a role's schema as a JSON value; nil when there is none.
func llmSchema(schema []byte) json.RawMessage {
	if !bytes.HasPrefix(bytes.TrimSpace(schema), []byte("{")) || !json.Valid(schema) {
		return nil
	}
	return json.RawMessage(schema)
}
