//go:build unix

package sim

import (
	"runtime"
	"syscall"
)

// peakRSSBytes is the process's peak resident set size, or 0 if unknown.
func peakRSSBytes() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return float64(ru.Maxrss) // bytes there, KiB elsewhere
	}
	return float64(ru.Maxrss) * 1024
}
