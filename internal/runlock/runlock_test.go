package runlock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestAcquireHolderRelease(t *testing.T) {
	sf := filepath.Join(t.TempDir(), ".claude", "aot-loop-state.md")
	if _, held, err := Holder(sf); held || err != nil {
		t.Fatalf("Holder before any engine = held %v, %v; want free", held, err)
	}
	l, err := Acquire(sf)
	if err != nil {
		t.Fatal(err)
	}
	pid, held, err := Holder(sf)
	if err != nil || !held || pid != os.Getpid() {
		t.Fatalf("Holder = %d, %v, %v; want this process", pid, held, err)
	}
	if _, err := Acquire(sf); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Acquire = %v; want ErrRunning", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := Holder(sf); held {
		t.Fatal("lock still held after Release")
	}
	l2, err := Acquire(sf)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	_ = l2.Release()
}
