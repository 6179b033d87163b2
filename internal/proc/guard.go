package proc

import (
	"os"
	"os/exec"
	"slices"
)

// LifelineFD is the file descriptor on which a guard reads its lifeline.
const LifelineFD = 3

// Guard is a program that runs a command and outlives the process that
// started it just long enough to kill the command's tree: [Supervise] is its
// body. [Cmd.Run] starts it as Path with Args followed by the shell's argv,
// in the tree's own process group and with its token, in place of the
// shell. Its file descriptor LifelineFD is the read end of a pipe whose
// write end only the starting process holds: when that process dies,
// however it dies (SIGKILL included), the kernel closes the write end, the
// guard reads end of file and kills the tree.
type Guard struct {
	Path string
	Args []string // Args[0] is the name the program sees
}

// wrap makes cmd, a shell command about to start, run under g.
func (g *Guard) wrap(cmd *exec.Cmd, lifeline *os.File) {
	cmd.Path = g.Path
	cmd.Args = append(slices.Clip(g.Args), cmd.Args...)
	cmd.ExtraFiles = []*os.File{lifeline}
	guardAttrs(cmd)
}
