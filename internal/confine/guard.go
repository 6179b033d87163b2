package confine

import (
	"fmt"
	"os"

	"github.com/aot-loop/aot/internal/proc"
)

// Main is the guard's body, `aot agent-guard [--landlock] [--rw PATH]...
// -- COMMAND...`, started by proc.Cmd with the lifeline as file descriptor
// proc.LifelineFD. With --landlock it confines itself, and so COMMAND, to
// writing under the --rw paths (and /dev), then supervises COMMAND (see
// proc.Supervise). It returns the exit code to leave with.
func Main(args []string) int {
	landlock, rw, argv, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "aot %s: %v\n", Command, err)
		return 2
	}
	lifeline := os.NewFile(proc.LifelineFD, "lifeline")
	if lifeline == nil {
		fmt.Fprintf(os.Stderr, "aot %s: no lifeline on file descriptor %d\n", Command, proc.LifelineFD)
		return 2
	}
	if landlock {
		if err := restrict(rw); err != nil {
			// Confinement was promised: never run the agent without it.
			fmt.Fprintf(os.Stderr, "aot %s: confine the agent: %v\n", Command, err)
			return 126
		}
	}
	return proc.Supervise(lifeline, argv)
}

// parseArgs reads Main's arguments.
func parseArgs(args []string) (landlock bool, rw, argv []string, err error) {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--landlock":
			landlock = true
		case "--rw":
			if i+1 >= len(args) {
				return false, nil, nil, fmt.Errorf("--rw needs a path")
			}
			i++
			rw = append(rw, args[i])
		case "--":
			if i+1 >= len(args) {
				return false, nil, nil, fmt.Errorf("no command after --")
			}
			return landlock, rw, args[i+1:], nil
		default:
			return false, nil, nil, fmt.Errorf("unknown argument %q (usage: aot %s [--landlock] [--rw PATH]... -- COMMAND...)", args[i], Command)
		}
	}
	return false, nil, nil, fmt.Errorf("no command (usage: aot %s [--landlock] [--rw PATH]... -- COMMAND...)", Command)
}
