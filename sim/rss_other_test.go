//go:build !unix

package sim

// peakRSSBytes is unknown on this platform.
func peakRSSBytes() float64 { return 0 }
