package durable

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aot-loop/aot/internal/temporaltest"
)

// cpuSpent is the CPU time used so far by this process, by the children
// it has waited for (git, the agents), and by the dev server at addr.
func cpuSpent(addr string) (self, children, server time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if pid := temporaltest.PID(addr); pid > 0 {
		if data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if i := strings.LastIndexByte(string(data), ')'); i > 0 {
				// utime and stime, fields 14 and 15, in clock ticks of 10 ms.
				if f := strings.Fields(string(data)[i+1:]); len(f) > 12 {
					u, _ := strconv.ParseInt(f[11], 10, 64)
					s, _ := strconv.ParseInt(f[12], 10, 64)
					server = time.Duration(u+s) * 10 * time.Millisecond
				}
			}
		}
	}
	return self, children, server
}
