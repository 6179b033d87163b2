//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setAttrs puts cmd in its own process group and kills it with its parent.
func setAttrs(cmd *exec.Cmd) {
	setGroup(cmd)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// guardAttrs puts a guard in its own process group, without a parent-death
// signal: it must outlive its starter to kill the tree.
func guardAttrs(cmd *exec.Cmd) {
	setGroup(cmd)
	cmd.SysProcAttr.Pdeathsig = 0
}

// childAttrs makes a guard's child die with the guard.
func childAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// becomeSubreaper makes this process adopt its orphaned descendants.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// waiter waits for a started command in two steps: exited waits without
// reaping (waitid WNOWAIT), so the shell's pid, and with it the PGID, cannot
// be reused while the rest of the tree is killed; reap then lets exec.Cmd's
// Wait reap it.
type waiter struct {
	cmd    *exec.Cmd
	err    error
	reaped bool
}

func newWaiter(cmd *exec.Cmd) *waiter { return &waiter{cmd: cmd} }

// exited returns when the shell has exited.
func (w *waiter) exited() {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, w.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.err, w.reaped = w.cmd.Wait(), true
		}
		return
	}
}

// reap returns the shell's exit; call it after exited returned.
func (w *waiter) reap() (*os.ProcessState, error) {
	if !w.reaped {
		w.err, w.reaped = w.cmd.Wait(), true
	}
	return w.cmd.ProcessState, w.err
}

// procInfo is what a scan learns about one live process.
type procInfo struct {
	pid, ppid, pgid int
	state           byte
	start           uint64 // start time in clock ticks since boot
	token           bool   // its environment carries the token
	noEnv           bool   // its environment is empty or unreadable
}

// readStat parses /proc/pid/stat.
func readStat(pid int) (procInfo, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procInfo{}, errors.New("malformed stat")
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, errors.New("malformed stat")
	}
	p := procInfo{pid: pid, state: f[0][0]}
	p.ppid, _ = strconv.Atoi(string(f[1]))
	p.pgid, _ = strconv.Atoi(string(f[2]))
	p.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return p, nil
}

// readEnvToken reads pid's environment: whether it lists token in TokenEnv,
// and whether it is empty (cleared by env -i, or momentarily unreadable while
// the process is in execve).
func readEnvToken(pid int, token string) (has, empty bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(env) == 0 {
		return false, true
	}
	key := []byte(TokenEnv + "=")
	for len(env) > 0 {
		var kv []byte
		kv, env, _ = bytes.Cut(env, []byte{0})
		if v, ok := bytes.CutPrefix(kv, key); ok && hasToken(string(v), token) {
			return true, false
		}
	}
	return false, false
}

// scan lists the live (not zombie) processes, other than this one, that
// are in group pgid (0: none) or are owned by our user and carry token. It
// also lists, with noEnv set, the processes of ours whose environment is
// empty and whose parent is this process or a carrier of the token: they may
// be carriers caught inside execve, when /proc/PID/environ reads empty.
func scan(token string, pgid int) ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	self, euid := os.Getpid(), uint32(os.Geteuid())
	var out, noEnv []procInfo
	carriers := map[int]bool{}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		p, err := readStat(pid)
		if err != nil || p.state == 'Z' || p.state == 'X' || p.state == 'x' {
			continue
		}
		if token != "" {
			if fi, err := os.Stat("/proc/" + name); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == euid {
					p.token, p.noEnv = readEnvToken(pid, token)
				}
			}
		}
		switch {
		case p.token || (pgid > 0 && p.pgid == pgid):
			out = append(out, p)
			if p.token {
				carriers[pid] = true
			}
		case p.noEnv:
			noEnv = append(noEnv, p)
		}
	}
	for _, p := range noEnv {
		if p.ppid == self || carriers[p.ppid] {
			out = append(out, p)
		}
	}
	return out, nil
}

// killTree kills t's processes. sh is the tree's shell when we started it
// and have not reaped it yet: its pid still names the group, which is then
// killed unconditionally; otherwise (sh nil) the group is killed only if one
// of its members carries the token.
func killTree(t Tree, sh *os.Process) error {
	pgid := t.PGID
	if !groupOK(pgid) {
		pgid = 0
	}
	if pgid == 0 && t.Token == "" {
		return nil
	}
	shellPid := 0
	trustGroup := sh != nil
	if sh != nil {
		shellPid = sh.Pid
	}
	killed := map[int]procInfo{}
	uncertain := map[int]time.Time{} // pid -> when first seen with no environment
	deadline := time.Now().Add(killBudget)
	pause := time.Millisecond
	for round := 0; ; round++ {
		procs, err := scan(t.Token, pgid)
		if err != nil {
			// No /proc: the group is all we can do.
			if trustGroup {
				return killGroup(pgid)
			}
			return fmt.Errorf("find the processes of the tree: %w", err)
		}
		if !trustGroup {
			// Looked at every round: the group's only member may be a
			// carrier caught inside execve at first.
			for _, p := range procs {
				if p.token && p.pgid == pgid {
					trustGroup = true
				}
			}
		}
		var targets []procInfo
		recheck := false
		for _, p := range procs {
			switch {
			case p.token || (trustGroup && p.pgid == pgid):
				targets = append(targets, p)
			case p.noEnv:
				// Look again for a while: a carrier inside execve reads as
				// having no environment for a moment.
				first, seen := uncertain[p.pid]
				if !seen {
					first = time.Now()
					uncertain[p.pid] = first
				}
				grace := execGrace
				if pgid > 0 && p.pgid == pgid {
					grace = execGraceGroup // in the tree's group: most likely ours
				}
				if time.Since(first) < grace {
					recheck = true
				}
			}
		}
		if len(targets) == 0 && !recheck {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the tree still alive after %v (first: pid %d)", len(targets), killBudget, targets[0].pid)
		}
		if trustGroup && len(targets) > 0 {
			_ = killGroup(pgid)
		}
		for _, p := range targets {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			if p.pid != shellPid {
				killed[p.pid] = p
			}
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	reapKilled(killed, shellPid)
	if trustGroup && pgid > 0 {
		reapGroupZombies(pgid, shellPid)
	}
	return nil
}

// reapGroupZombies reaps the zombie children of ours in group pgid, except
// the shell: members of the tree's group that were adopted by us and killed
// before a scan saw them. exec.Cmd children other than the shell are never
// in that group.
func reapGroupZombies(pgid, shellPid int) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == shellPid {
			continue
		}
		if p, err := readStat(pid); err == nil && p.state == 'Z' && p.ppid == self && p.pgid == pgid {
			var info unix.Siginfo
			_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
		}
	}
}

// execGrace is how long a process of the tree's lineage whose environment
// reads empty is watched, in case it was only inside execve.
const execGrace = 500 * time.Millisecond

// execGraceGroup is execGrace for such a process inside the tree's own
// process group: on a loaded machine an execve can take seconds.
const execGraceGroup = 3 * time.Second

// reapBudget bounds how long reapKilled waits for killed orphans to be
// reparented to us.
const reapBudget = 500 * time.Millisecond

// reapKilled reaps the processes we killed that are now zombie children of
// ours (orphans adopted by this subreaper). Each is checked by pid, start
// time and parent first, so neither an unrelated process nor a child another
// exec.Cmd is waiting for is ever reaped here.
func reapKilled(killed map[int]procInfo, shellPid int) {
	self := os.Getpid()
	deadline := time.Now().Add(reapBudget)
	for len(killed) > 0 {
		for pid, want := range killed {
			p, err := readStat(pid)
			switch {
			case err != nil || p.start != want.start:
				delete(killed, pid) // gone, reaped by its parent
			case p.state == 'Z' && p.ppid == self:
				var info unix.Siginfo
				_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
				delete(killed, pid)
			case p.state == 'Z':
				if _, dying := killed[p.ppid]; !dying && p.ppid != shellPid {
					delete(killed, pid) // its live parent reaps it
				}
			}
		}
		if len(killed) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func alive(t Tree) bool {
	pgid := t.PGID
	if !groupOK(pgid) {
		pgid = 0
	}
	if pgid == 0 && t.Token == "" {
		return false
	}
	procs, err := scan(t.Token, pgid)
	if err != nil {
		return pgid > 0 && syscall.Kill(-pgid, 0) == nil
	}
	for _, p := range procs {
		if p.token || p.pgid == pgid {
			return true
		}
	}
	return false
}
