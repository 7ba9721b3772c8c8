package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// PNG resolutions --dpi accepts: a 6-inch plot at 1200 dpi is 7200 pixels
// wide (about 140 MB of pixels); beyond, a typo (--dpi 100000) runs out
// of memory.
const minDPI, maxDPI = 10, 1200

// checkFlagValues rejects, in every verb, values no flag of eppsim means
// anything with: NaN and ±Inf in a floating-point flag (--tolerance NaN
// would pass every comparison, --rate Inf never end), and a --dpi outside
// [minDPI, maxDPI].
func checkFlagValues(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		if f.Name == "dpi" {
			if v, perr := strconv.Atoi(f.Value.String()); perr == nil && (v < minDPI || v > maxDPI) {
				err = fmt.Errorf("--dpi %d: must be in %d..%d", v, minDPI, maxDPI)
			}
			return
		}
		var vals []float64
		switch f.Value.Type() {
		case "float64", "float32":
			v, perr := strconv.ParseFloat(f.Value.String(), 64)
			if perr != nil {
				return
			}
			vals = []float64{v}
		case "float64Slice":
			vals, _ = cmd.Flags().GetFloat64Slice(f.Name)
		case "float32Slice":
			vs, _ := cmd.Flags().GetFloat32Slice(f.Name)
			for _, v := range vs {
				vals = append(vals, float64(v))
			}
		}
		for _, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				err = fmt.Errorf("--%s %v: must be a finite number", f.Name, v)
				return
			}
		}
	})
	return err
}
