//go:build linux

package confine

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// minABI is the oldest Landlock ABI that confines agents: ABI 1 cannot let
// a file move from one allowed folder to another (the "refer" right), so
// go-landlock would give up confining altogether.
const minABI = 2

// Probe says whether this kernel can confine agents.
func Probe() Status {
	v, err := llsys.LandlockGetABIVersion()
	switch {
	case err != nil:
		return Status{Why: fmt.Sprintf("this kernel has no Landlock (%v)", err)}
	case v < minABI:
		return Status{Why: fmt.Sprintf("this kernel's Landlock (ABI %d) is too old; ABI %d or later is needed", v, minABI)}
	}
	return Status{On: true, Why: fmt.Sprintf("Landlock (kernel ABI %d): agents write only in their workdir, its git folders, the temp folder, the state file's folder and their CLIs' folders (Codex keeps to its own sandbox)", v)}
}

// restrict confines this process and its future children: read and run
// anything, write only under rw and /dev. Paths that do not exist are left
// out. Network and signals are not restricted. Inside the domain mounts
// cannot change, so a CLI that sandboxes itself with bubblewrap (Codex)
// fails there: see Guard.WithoutLandlock.
func restrict(rw []string) error {
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWDirs("/dev").WithIoctlDev().IgnoreIfMissing(),
	}
	for _, p := range rw {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			rules = append(rules, landlock.RWDirs(p).WithRefer())
		default:
			rules = append(rules, landlock.RWFiles(p))
		}
	}
	// V5 handles every filesystem right up to device ioctls; later ABIs
	// add unix socket connections, which agents' tools use freely.
	return landlock.V5.BestEffort().RestrictPaths(rules...)
}
