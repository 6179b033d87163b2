package verify

import (
	"strings"
	"testing"
	"time"
)

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "90", want: 90 * time.Second},
		{in: " 5 ", want: 5 * time.Second},
		{in: "1", want: time.Second},
		{in: "90s", want: 90 * time.Second},
		{in: "2m", want: 2 * time.Minute},
		{in: "1m30s", want: 90 * time.Second},
		{in: "300ms", want: 300 * time.Millisecond},
		{in: "", wantErr: "empty"},
		{in: "0", wantErr: "greater than zero"},
		{in: "0s", wantErr: "greater than zero"},
		{in: "-5s", wantErr: "greater than zero"},
		{in: "-5", wantErr: "invalid timeout"},
		{in: "abc", wantErr: "invalid timeout"},
		{in: "1.5", wantErr: "invalid timeout"},
		{in: "99999999999999999999", wantErr: "too large"},
		{in: "9223372037", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTimeout(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTimeout(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseTimeout(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}
