package simagent

import (
	"os"
	"os/exec"
	"time"
)

// ProcessEnv is the real process's Env: stdin, stdout, stderr, SIGKILL to
// itself, real sleeps and a real background `sleep 1000`.
func ProcessEnv() Env {
	return Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Pid:             os.Getpid(),
		Kill:            killSelf,
		Sleep:           time.Sleep,
		StartBackground: startBackground,
		Now:             time.Now,
	}
}

// startBackground starts `sleep 1000` the way an agent starts a dev server
// and forgets it: same process group, output to nowhere (so it holds no pipe
// of the runner's), never waited for.
func startBackground() (int, error) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	return pid, cmd.Process.Release()
}
