//go:build !unix

package scenario

// cpuSeconds is unknown on this platform.
func cpuSeconds() float64 { return 0 }

// peakRSSBytes is unknown on this platform.
func peakRSSBytes() float64 { return 0 }
