//go:build !unix

package capacity

func cpuSeconds() float64 { return 0 }
