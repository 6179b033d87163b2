//go:build !linux

package confine

import "errors"

// Probe says whether this system can confine agents: only Linux can.
func Probe() Status {
	return Status{Why: "Landlock is Linux only"}
}

func restrict(rw []string) error {
	return errors.New("Landlock is Linux only")
}
