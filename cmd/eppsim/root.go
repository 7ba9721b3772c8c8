package main

import (
	"github.com/spf13/cobra"
)

// version is the eppsim version; release builds override it with -ldflags.
var version = "0.1.0-dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "eppsim",
		Short:         "Discrete-event simulator and evaluator for KV-cache-aware LLM routing (llm-d EPP)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	addProfileFlag(root)
	// Verbs, one file each.
	root.AddCommand(
		newRunCmd(),
		newEPPCmd(),
		newTraceCmd(),
		newSweepCmd(),
		newTuneCmd(),
		newCapacityCmd(),
		newDiffCmd(),
		newCalibrateCmd(),
		newValidateCmd(),
	)
	return root
}
