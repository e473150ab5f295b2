package main

import (
	"context"
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawConn is a TCP connection whose reads and writes are raw system calls
// on its non-blocking socket, waiting for it through Go's poller as net
// does (syscall.RawConn): the same bytes at the same moments, without
// entering the runtime's blocking-syscall state. That state wakes Go's
// sysmon thread out of its sleep on every syscall after an idle spell, and
// a device is idle between frames: sysmon's wake-ups and nanosleeps were
// the largest single share of voxbench's CPU.
type rawConn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// dialRaw dials TCP for the WebSocket dialer and wraps the connection.
func dialRaw(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &rawConn{TCPConn: tc, rc: rc}, nil
}

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.once("read", syscall.SYS_READ, p, c.rc.Read)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (c *rawConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := c.once("write", syscall.SYS_WRITE, p[written:], c.rc.Write)
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// once makes one read or write system call (trap) on the socket, waiting
// through wait (the RawConn's Read or Write) while it would block.
func (c *rawConn) once(op string, trap uintptr, p []byte, wait func(func(fd uintptr) bool) error) (int, error) {
	var n int
	var errno syscall.Errno
	err := wait(func(fd uintptr) bool {
		r, e := rawIO(trap, fd, p)
		if e == syscall.EAGAIN {
			return false // wait until ready
		}
		n, errno = r, e
		return true
	})
	switch {
	case err != nil:
		return 0, c.opError(op, err)
	case errno != 0:
		return 0, c.opError(op, errno)
	}
	return n, nil
}

// rawIO is read(2) or write(2) of b on a non-blocking fd, retried on
// EINTR; it never blocks, so it needs no runtime syscall state.
func rawIO(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))) //nolint:gosec // b is a Go slice alive for the call, read(2)/write(2) take its address
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}

func (c *rawConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
