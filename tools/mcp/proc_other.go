//go:build !unix

package mcp

import "os/exec"

func ownGroup(*exec.Cmd) {}

// killGroup kills the command alone where there are no process groups.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
