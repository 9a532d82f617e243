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

// cpuReading is the CPU seconds (user + system) used so far by this
// process (the harness) and by each of its children of a known class
// (replica processes, API servers, etcd), by class and pid.
type cpuReading map[string]map[int]float64

// cpuSeconds reads the CPU of the harness and its children now.
func cpuSeconds() cpuReading {
	out := cpuReading{}
	add := func(class string, pid int) {
		if t, ok := procTicks(pid); ok {
			if out[class] == nil {
				out[class] = map[int]float64{}
			}
			out[class][pid] = t
		}
	}
	self := os.Getpid()
	add(classHarness, self)
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
		switch name := strings.TrimSpace(string(comm)); {
		case name == "kube-apiserver":
			add(classAPIServers, pid)
		case name == "etcd":
			add(classEtcd, pid)
		case strings.HasPrefix(name, "clustershard"):
			add(classReplicas, pid)
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

// cpuSince is the CPU seconds each class used since before, by the
// processes running now (one started since counts from zero). A process
// that exited since is not counted: its CPU is gone with it.
func cpuSince(before cpuReading) map[string]float64 {
	out := map[string]float64{}
	for class, pids := range cpuSeconds() {
		var sum float64
		for pid, v := range pids {
			sum += v - before[class][pid]
		}
		out[class] = round(sum, 2)
	}
	return out
}
