package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkFiniteFlags rejects NaN and ±Inf in every floating-point flag given
// on cmd's command line: no flag of eppsim means anything with them
// (--tolerance NaN would pass every comparison, --rate Inf never end).
func checkFiniteFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
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
