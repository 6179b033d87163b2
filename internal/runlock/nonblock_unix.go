//go:build unix

package runlock

import "syscall"

// oNonblock makes opening a FIFO return at once instead of waiting for the
// other end.
const oNonblock = syscall.O_NONBLOCK
