package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process classes of the CPU accounting.
const (
	classReplicas   = "replicas"
	classAPIServers = "apiServers"
	classEtcd       = "etcd"
	classHarness    = "harness"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat (100 on every Linux this runs on).
const clockTicks = 100

// cpuSeconds returns the CPU seconds (user + system) used so far by this
// process (the harness) and by its children, by class: replica processes,
// API servers and etcd. A child that exited is not counted, so take both
// readings while the processes of the scenario run.
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	self := os.Getpid()
	if t, ok := procTicks(self); ok {
		out[classHarness] = t
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == self || parentOf(pid) != self {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		class := ""
		switch name := strings.TrimSpace(string(comm)); {
		case name == "kube-apiserver":
			class = classAPIServers
		case name == "etcd":
			class = classEtcd
		case strings.HasPrefix(name, "clustershard"):
			class = classReplicas
		default:
			continue
		}
		if t, ok := procTicks(pid); ok {
			out[class] += t
		}
	}
	return out
}

// statFields returns the fields of /proc/<pid>/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// procTicks is utime + stime of pid in seconds.
func procTicks(pid int) (float64, bool) {
	f := statFields(pid)
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (u + s) / clockTicks, true
}

// cpuSince is the CPU seconds each class used since before.
func cpuSince(before map[string]float64) map[string]float64 {
	now := cpuSeconds()
	out := map[string]float64{}
	for class, v := range now {
		out[class] = round(v-before[class], 2)
	}
	return out
}
