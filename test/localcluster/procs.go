package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The control plane's processes are children of the process that started
// them. If that process dies without tearing down (a panic in a test, kill -9),
// they would live on: every ControlPlane records its children in a file under
// recordDir, and Start kills the recorded children of owners that are gone.

func recordDir() string { return filepath.Join(os.TempDir(), "clustershard-localcluster") }

// childProcs returns the PIDs of this process's children whose command line
// contains every one of needles.
func childProcs(needles ...string) []int {
	self := os.Getpid()
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || parentOf(pid) != self {
			continue
		}
		cmd := cmdline(pid)
		ok := cmd != ""
		for _, n := range needles {
			ok = ok && strings.Contains(cmd, n)
		}
		if ok {
			pids = append(pids, pid)
		}
	}
	return pids
}

func parentOf(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name is in parentheses and may contain spaces: skip past it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return -1
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

func cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// recordChildren writes the current control-plane children of this process
// (binaries from binDir) to this process's record file.
func recordChildren(binDir string) {
	pids := childProcs(binDir)
	if err := os.MkdirAll(recordDir(), 0o700); err != nil {
		return
	}
	var b strings.Builder
	for _, p := range pids {
		fmt.Fprintln(&b, p)
	}
	_ = os.WriteFile(filepath.Join(recordDir(), strconv.Itoa(os.Getpid())), []byte(b.String()), 0o600)
}

func forgetChildren() { _ = os.Remove(filepath.Join(recordDir(), strconv.Itoa(os.Getpid()))) }

// reapOrphans kills control-plane processes (binaries from binDir) recorded by
// owners that no longer run, and removes their records.
func reapOrphans(binDir string) {
	files, _ := os.ReadDir(recordDir())
	for _, f := range files {
		owner, err := strconv.Atoi(f.Name())
		if err != nil || owner == os.Getpid() || alive(owner) {
			continue
		}
		path := filepath.Join(recordDir(), f.Name())
		data, _ := os.ReadFile(path)
		for _, line := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(line)
			if err == nil && strings.Contains(cmdline(pid), binDir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.Remove(path)
	}
}

// Children returns the command lines of this process's live children whose
// command line contains every one of needles (all children without needles),
// for checks that a run left no process behind.
func Children(needles ...string) []string {
	var out []string
	for _, pid := range childProcs(needles...) {
		out = append(out, fmt.Sprintf("%d %s", pid, cmdline(pid)))
	}
	return out
}
