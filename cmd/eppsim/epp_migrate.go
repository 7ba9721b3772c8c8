package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

// newEPPMigrateCmd is `eppsim epp migrate`: an older EndpointPickerConfig
// (llm-d-inference-scheduler v0.2.x era) written in today's schema, each
// translation named in a comment and on stderr (docs/epp.md "Older
// configs and releases").
func newEPPMigrateCmd() *cobra.Command {
	var out, release string
	cmd := &cobra.Command{
		Use:   "migrate OLD.yaml",
		Short: "Translate an older EndpointPickerConfig (llm-d 0.2 era) to today's schema",
		Long: "Write OLD.yaml in today's schema (llm-d-router ebab687): kv-cache-scorer becomes\n" +
			"kv-cache-utilization-scorer, the v0.2.x prefix-cache-scorer's estimate mode becomes\n" +
			"prefix-cache-scorer + approx-prefix-cache-producer and its cache_tracking mode\n" +
			"precise-prefix-cache-scorer, and the apiVersion llm-d.ai/v1alpha1. Each translation is\n" +
			"named in a comment above what it changed and on stderr; one that changes behaviour\n" +
			"says how, and that --epp-release " + config.ReleaseLLMDv02 + " reproduces the old release.\n" +
			"With --epp-release, the prefix-cache-scorer becomes eppsim's model of that release\n" +
			"instead. `eppsim run` translates such files the same way in memory, with the same\n" +
			"warnings. A file of today's schema is written unchanged. Exits 2 on a file that\n" +
			"cannot be translated, naming file, line, field and the translation to apply.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRelease(release); err != nil {
				return withExitCode(2, err)
			}
			var target *outTarget
			if out != "" {
				t, err := checkOutFile("--out", out)
				if err != nil {
					return err
				}
				target = t
			}
			m, err := config.MigrateFile(args[0], config.MigrateOptions{Release: release})
			if err != nil {
				return withExitCode(2, err)
			}
			// The translation must load as it is written.
			if _, err := config.Load(m.YAML, config.Options{Registry: plugins.Builtin(), Seed: 1, File: "the translation of " + args[0], Release: release}); err != nil {
				return fmt.Errorf("epp migrate: the translation does not load (an eppsim bug): %w", err)
			}
			stderr := cmd.ErrOrStderr()
			if len(m.Translations) == 0 {
				fmt.Fprintf(stderr, "eppsim: %s: nothing to translate (today's schema); written unchanged\n", args[0])
			}
			for _, t := range m.Translations {
				fmt.Fprintf(stderr, "eppsim: %s: %s\n", args[0], t)
			}
			if target == nil {
				_, err := cmd.OutOrStdout().Write(m.YAML)
				return err
			}
			return writeOutFile(cmd.Context(), target, m.YAML)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the translation to this file (temporary file + rename) instead of stdout")
	cmd.Flags().StringVar(&release, "epp-release", "", "translate to eppsim's model of this upstream release instead of today's plugins: "+releaseHelp())
	return cmd
}

// releaseHelp lists the --epp-release values with what each does.
func releaseHelp() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(config.Releases)) {
		parts = append(parts, n+" ("+config.Releases[n]+")")
	}
	return strings.Join(parts, "; ")
}

// checkRelease validates an --epp-release value ("" = none).
func checkRelease(release string) error {
	if _, ok := config.Releases[release]; release != "" && !ok {
		return fmt.Errorf("--epp-release %q: unknown (have %s)", release, strings.Join(slices.Sorted(maps.Keys(config.Releases)), ", "))
	}
	return nil
}

// warnOlderConfig prints, on stderr, the warnings that name what was
// translated from an older configuration src (and that a release option
// changed nothing); none for a configuration of today's schema.
func warnOlderConfig(stderr io.Writer, src string, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "eppsim: warning: %s: %s\n", src, w)
	}
}
