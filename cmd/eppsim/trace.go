package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/traces"
	"github.com/eppsim/eppsim/workload"
)

// traceReadFlags are the options for reading a trace, shared by the trace
// subcommands.
type traceReadFlags struct {
	format        string
	mode          string
	api           string
	seed          uint64
	skipInvalid   bool
	traceBlock    int
	bytesPerToken float64
	model         string
	systemPrompt  int
	timeScale     float64
	rate          float64
	iperf         iperfFlags
}

func (f *traceReadFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "auto", formatHelp)
	fl.StringVar(&f.mode, "mode", "default", modeHelp)
	fl.StringVar(&f.api, "api", "default", apiHelp)
	fl.Uint64Var(&f.seed, "seed", 1, seedHelp)
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip (and count) malformed lines instead of failing")
	fl.IntVar(&f.traceBlock, "trace-block-size", 0, "tokens per hash id of hash-id traces (0: Mooncake 512, Alibaba 16)")
	fl.Float64Var(&f.bytesPerToken, "bytes-per-token", workload.DefaultBytesPerToken, "text density of synthesized prompts")
	fl.StringVar(&f.model, "model", "", "model name for bodies eppsim builds (default "+workload.DefaultModel+")")
	fl.IntVar(&f.systemPrompt, "system-prompt-tokens", 0, "Azure traces: shared system prompt length in tokens")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "multiply trace times by this factor (0.5 = twice as fast)")
	fl.Float64Var(&f.rate, "rate", 0, "rescale a timestamped trace to this many requests/s; session rate for untimestamped traces")
	f.iperf.register(fl)
}

func (f *traceReadFlags) options() (workload.Options, error) {
	var o workload.Options
	fm, err := workload.ParseFormat(f.format)
	if err != nil {
		return o, withExitCode(2, fmt.Errorf("--format: %w", err))
	}
	m, err := workload.ParseMode(f.mode)
	if err != nil {
		return o, withExitCode(2, fmt.Errorf("--mode: %w", err))
	}
	if o.API, err = workload.ParseAPI(f.api); err != nil {
		return o, withExitCode(2, fmt.Errorf("--api: %w", err))
	}
	switch {
	case f.traceBlock < 0:
		return o, withExitCode(2, fmt.Errorf("--trace-block-size %d: must not be negative (0 = the format's)", f.traceBlock))
	case !(f.bytesPerToken > 0):
		return o, withExitCode(2, fmt.Errorf("--bytes-per-token %v: must be positive", f.bytesPerToken))
	case f.systemPrompt < 0:
		return o, withExitCode(2, fmt.Errorf("--system-prompt-tokens %d: must not be negative", f.systemPrompt))
	case f.timeScale < 0:
		return o, withExitCode(2, fmt.Errorf("--time-scale %v: must not be negative (0 = as recorded)", f.timeScale))
	case f.rate < 0:
		return o, withExitCode(2, fmt.Errorf("--rate %v: must not be negative (0 = as recorded)", f.rate))
	}
	o.Format, o.Mode, o.Seed, o.SkipInvalid = fm, m, int64(f.seed), f.skipInvalid
	o.BlockSize, o.BytesPerToken, o.Model = f.traceBlock, f.bytesPerToken, f.model
	o.SystemPromptTokens, o.TimeScale, o.Rate = f.systemPrompt, f.timeScale, f.rate
	if err := f.iperf.apply(&o); err != nil {
		return o, withExitCode(2, err)
	}
	return o, nil
}

// traceOpen opens a trace file or builtin:NAME. Every failure here is about
// the input (missing file, unknown format or workload, bad options): exit 2.
func traceOpen(path string, o workload.Options) (*workload.Stream, error) {
	s, err := workload.Open(path, o)
	if err != nil {
		return nil, withExitCode(2, err)
	}
	return s, nil
}

// traceReadErr classifies an error met while reading a trace.
func traceReadErr(err error) error {
	if workload.IsInputError(err) {
		return withExitCode(2, err)
	}
	return err
}

// traceReportSkipped tells the user about skipped invalid lines.
func traceReportSkipped(w io.Writer, s *workload.Stream) {
	if n := s.EmptyRecords(); n > 0 {
		fmt.Fprintf(w, "eppsim: %d record(s) of %s had no turn to replay (no human message)\n", n, s.Name())
	}
	if s.Skipped() == 0 {
		return
	}
	fmt.Fprintf(w, "eppsim: skipped %d invalid record(s) of %s:\n", s.Skipped(), s.Name())
	for _, e := range s.SkippedErrors() {
		fmt.Fprintf(w, "  %v\n", e)
	}
	if s.Skipped() > len(s.SkippedErrors()) {
		fmt.Fprintf(w, "  ... and %d more\n", s.Skipped()-len(s.SkippedErrors()))
	}
}

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Inspect, synthesize and convert workload traces",
		Long: `trace works on the workloads eppsim replays: Mooncake and Alibaba hash-id JSONL,
OpenAI request JSONL, ShareGPT JSON, Azure LLM inference CSV, the built-in synthesized
workloads (builtin:` + strings.Join(traces.Names(), ", builtin:") + `) and the traffic of
inference-perf configs (inference-perf:FILE.yaml). See docs/workloads.md.`,
	}
	cmd.AddCommand(newTraceInspectCmd(), newTraceSynthCmd(), newTraceConvertCmd())
	return cmd
}

func newTraceInspectCmd() *cobra.Command {
	var rf traceReadFlags
	var jsonOut bool
	var blockSize int
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print a trace's size, timing, lengths and prefix-reuse statistics",
		Long: `inspect reads a trace (or builtin:NAME) and prints the format, request and session
counts, duration and rate, input/output length percentiles (nearest rank), the share of
repeated blocks and the infinite-cache token hit ratio: per request, the longest prefix of its
--block-size-token block chain already seen, capped at floor((n-1)/bs)*bs tokens (vLLM always
recomputes the last prompt token), summed over requests and divided by all prompt tokens.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if blockSize <= 0 {
				return withExitCode(2, fmt.Errorf("--block-size %d: must be > 0", blockSize))
			}
			o, err := rf.options()
			if err != nil {
				return err
			}
			o.NoTokens = true // hash-id and Azure traces are analysed per block
			s, err := traceOpen(args[0], o)
			if err != nil {
				return err
			}
			defer s.Close()
			sum, err := workload.Inspect(s, blockSize)
			if err != nil {
				return traceReadErr(err)
			}
			traceReportSkipped(cmd.ErrOrStderr(), s)
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(sum)
			}
			tracePrintSummary(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	cmd.Flags().IntVar(&blockSize, "block-size", 16, "engine block size (tokens) for the hit-ratio analysis")
	return cmd
}

func tracePrintSummary(w io.Writer, s *workload.Summary) {
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	lengths := func(l workload.Lengths) string {
		return fmt.Sprintf("mean %.0f  p50 %d  p90 %d  p99 %d  max %d", l.Mean, l.P50, l.P90, l.P99, l.Max)
	}
	fmt.Fprintf(w, "trace:           %s\n", s.Source)
	fmt.Fprintf(w, "format:          %s (%s)\n", s.Format, s.Mode)
	fmt.Fprintf(w, "requests:        %d", s.Requests)
	if s.Skipped > 0 {
		fmt.Fprintf(w, " (%d invalid records skipped)", s.Skipped)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "sessions:        %d (%d continuations, up to %d turns)\n", s.Sessions, s.Continuations, s.MaxTurns)
	dur := time.Duration(s.DurationSec * float64(time.Second))
	if dur >= time.Minute {
		dur = dur.Round(time.Second)
	} else {
		dur = dur.Round(time.Millisecond)
	}
	fmt.Fprintf(w, "duration:        %v (%.2f req/s)\n", dur, s.RatePerSec)
	fmt.Fprintf(w, "input tokens:    %s\n", lengths(s.Input))
	fmt.Fprintf(w, "output tokens:   %s\n", lengths(s.Output))
	if s.TraceBlocks > 0 {
		fmt.Fprintf(w, "trace blocks:    %d of %d tokens, %d distinct; %s repeat an earlier one\n",
			s.TraceBlocks, s.TraceBlockSize, s.DistinctTraceBlocks, pct(s.RepeatedTraceBlocks))
	}
	fmt.Fprintf(w, "%d-token blocks: %d full prompt blocks; %s already cached when they arrive\n", s.BlockSize, s.Blocks, pct(s.RepeatedBlocks))
	note := ""
	if s.OutputBlocksInserted {
		note = ", decode blocks cached"
	}
	fmt.Fprintf(w, "infinite-cache hit ratio: %s (%d of %d prompt tokens; %d-token blocks, num_tokens-1 rule%s)\n",
		pct(s.HitRatio), s.HitTokens, s.PromptTokens, s.BlockSize, note)
}

func newTraceSynthCmd() *cobra.Command {
	var preset, specFile, out, mode, model, from string
	var sessions int
	var seed uint64
	var rate float64
	var iperf iperfFlags
	cmd := &cobra.Command{
		Use:   "synth --out FILE | synth --from inference-perf FILE.yaml [--out FILE]",
		Short: "Synthesize traffic (multi-turn chat, or an inference-perf config's) as OpenAI JSONL",
		Long: `synth generates a workload from a preset (` + strings.Join(traces.Names(), ", ") + `) or a YAML
spec (--spec; it may start from a preset with "base: NAME") and writes it as OpenAI batch JSONL
with eppsim's replay fields (x_arrival_ms, x_session_id, x_turn, x_output_tokens,
x_output_text, x_think_ms). Reading the file back gives the same requests.

With --from inference-perf FILE.yaml it generates the traffic of an inference-perf config
(data, load, api and server sections; docs/workloads.md) and writes it the same way, each
request with x_stage, its load stage; --out defaults to stdout.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from != "" {
				if from != "inference-perf" {
					return withExitCode(2, fmt.Errorf("--from %q: only inference-perf is supported", from))
				}
				if len(args) != 1 {
					return withExitCode(2, errors.New("--from inference-perf needs the config file: synth --from inference-perf FILE.yaml"))
				}
				for _, name := range []string{"preset", "spec", "sessions", "rate", "mode"} {
					if cmd.Flags().Changed(name) {
						return withExitCode(2, fmt.Errorf("--%s does not apply to --from inference-perf (the config describes the traffic)", name))
					}
				}
				o := workload.Options{Seed: int64(seed), Model: model}
				if err := iperf.apply(&o); err != nil {
					return withExitCode(2, err)
				}
				if out == "" {
					out = "-"
				}
				return iperfSynth(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], out, o)
			}
			if len(args) > 0 {
				return withExitCode(2, fmt.Errorf("unexpected argument %q (a config file goes with --from inference-perf)", args[0]))
			}
			if out == "" {
				return withExitCode(2, errors.New("--out is required (use - for stdout)"))
			}
			target, err := traceOutTarget(out)
			if err != nil {
				return err
			}
			var spec *workload.Spec
			if specFile != "" {
				data, rerr := workload.ReadConfigFile(specFile)
				if rerr != nil {
					return withExitCode(2, fmt.Errorf("--spec: %w", rerr))
				}
				spec, err = workload.ParseSpec(data)
				if err != nil {
					err = fmt.Errorf("%s: %w", specFile, err)
				}
			} else {
				spec, err = workload.PresetSpec(preset)
			}
			if err != nil {
				return withExitCode(2, err)
			}
			if sessions < 0 {
				return withExitCode(2, fmt.Errorf("--sessions %d: must be positive (0 = the spec's)", sessions))
			}
			if rate < 0 {
				return withExitCode(2, fmt.Errorf("--rate %v: must not be negative (0 = the spec's)", rate))
			}
			if sessions != 0 {
				spec.Sessions = sessions
			}
			m, err := workload.ParseMode(mode)
			if err != nil {
				return withExitCode(2, err)
			}
			o := workload.Options{Seed: int64(seed), Mode: m, Rate: rate, Model: model}
			s, err := workload.NewSynthesizer(spec, synthRNG(seed), o)
			if err != nil {
				return withExitCode(2, err)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if err := synthWarnSize(ctx, cmd.ErrOrStderr(), spec, seed, o); err != nil {
				return err
			}
			n, err := traceWriteJSONL(ctx, cmd.OutOrStdout(), target, s)
			if err != nil {
				return traceReadErr(err)
			}
			if out != "-" {
				fmt.Fprintf(cmd.ErrOrStderr(), "eppsim: wrote %d requests to %s\n", n, out)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&preset, "preset", "chat", "built-in spec: "+strings.Join(traces.Names(), ", "))
	fl.StringVar(&specFile, "spec", "", "YAML spec file (overrides --preset)")
	fl.IntVar(&sessions, "sessions", 0, "number of sessions (0: the spec's)")
	fl.Uint64Var(&seed, "seed", 1, seedHelp)
	fl.Float64Var(&rate, "rate", 0, "session arrival rate per second (0: the spec's)")
	fl.StringVar(&mode, "mode", "closed-loop", "closed-loop (later turns carry x_think_ms: replayed after the previous turn completes) or open-loop (no think times)")
	fl.StringVar(&model, "model", "", "model name (default: the spec's)")
	fl.StringVarP(&out, "out", "o", "", outFileHelp)
	fl.StringVar(&from, "from", "", "generate the traffic of a config of this tool instead: inference-perf")
	iperf.register(fl)
	return cmd
}

func newTraceConvertCmd() *cobra.Command {
	var rf traceReadFlags
	var to, out string
	cmd := &cobra.Command{
		Use:   "convert --to openai-jsonl IN --out FILE",
		Short: "Convert any supported trace to OpenAI JSONL with replay fields",
		Long: `convert reads a trace in any supported format (or builtin:NAME) and writes every request
as an OpenAI batch JSONL line: the body eppsim sends (for hash-id and Azure traces a completions
request with the synthesized prompt text), plus x_arrival_ms, x_session_id, x_turn,
x_output_tokens, x_output_text (when known) and x_think_ms (closed-loop turns).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to != "openai-jsonl" && to != "openai" {
				return withExitCode(2, fmt.Errorf("--to %q: only openai-jsonl is supported", to))
			}
			if out == "" {
				return withExitCode(2, errors.New("--out is required (use - for stdout)"))
			}
			target, err := traceOutTarget(out)
			if err != nil {
				return err
			}
			o, err := rf.options()
			if err != nil {
				return err
			}
			// The trace is opened and read on a goroutine of its own, so
			// that a signal stops convert even while a read blocks (a
			// FIFO without a writer).
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			p, err := openTrace(ctx, args[0], o)
			if err != nil {
				if ctx.Err() != nil {
					return interrupted(ctx, nil)
				}
				return err
			}
			n, err := traceWriteJSONL(ctx, cmd.OutOrStdout(), target, p)
			if err != nil {
				return traceReadErr(err)
			}
			traceReportSkipped(cmd.ErrOrStderr(), p.Stream())
			if out != "-" {
				fmt.Fprintf(cmd.ErrOrStderr(), "eppsim: wrote %d requests to %s\n", n, out)
			}
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().StringVar(&to, "to", "openai-jsonl", "output format (openai-jsonl)")
	cmd.Flags().StringVarP(&out, "out", "o", "", outFileHelp)
	return cmd
}

// outFileHelp is the help of trace synth/convert's --out.
const outFileHelp = "output file: written to a temporary file, then renamed (onto a symbolic link's target); a device or FIFO is written to directly; - for stdout"

// traceOutTarget checks trace synth/convert's --out: nil for "-" (stdout).
func traceOutTarget(out string) (*outTarget, error) {
	if out == "-" {
		return nil, nil
	}
	return checkOutFile("--out", out)
}

// traceWriteJSONL streams src as OpenAI JSONL to out (nil: stdout), a file
// written through a temporary file renamed into place (outTarget), so that
// an interrupted or failed run leaves no half-written output. ctx ending
// stops it: the temporary file is removed and the error is interrupted's.
func traceWriteJSONL(ctx context.Context, stdout io.Writer, out *outTarget, src workload.Source) (n int, err error) {
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = interrupted(ctx, nil)
		}
	}()
	w := stdout
	var f *outFile
	if out != nil {
		if f, err = out.create(ctx); err != nil {
			return 0, err
		}
		defer f.Abort()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	done := ctx.Done()
	for {
		select {
		case <-done:
			return n, ctx.Err()
		default:
		}
		r, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		if err := workload.WriteOpenAI(bw, r); err != nil {
			return n, err
		}
		n++
	}
	if err := bw.Flush(); err != nil {
		if out == nil {
			return n, fmt.Errorf("writing stdout: %w", err)
		}
		return n, out.wrap(err)
	}
	if f != nil {
		return n, f.Commit()
	}
	return n, nil
}

// A tracePump reads a trace on a goroutine of its own, a few requests
// ahead, so that a read blocked on its input (a FIFO without a writer, a
// pipe from a slow producer) does not keep the verb from noticing its
// context's end: Next returns ctx's error then. The goroutine closes the
// stream when it ends: after the terminal error, or once ctx has ended and
// the read it is blocked in returns.
type tracePump struct {
	ctx context.Context
	s   *workload.Stream
	ch  chan pumped
	err error // the terminal error, once returned
}

type pumped struct {
	r   *workload.Request
	err error
}

// pumpBuffer is how many requests a tracePump reads ahead.
const pumpBuffer = 64

// openTrace opens a trace file or builtin:NAME (traceOpen) on the pump's
// goroutine; ctx ending first returns ctx's error.
func openTrace(ctx context.Context, path string, o workload.Options) (*tracePump, error) {
	p := &tracePump{ctx: ctx, ch: make(chan pumped, pumpBuffer)}
	opened := make(chan error, 1)
	go func() {
		s, err := traceOpen(path, o)
		if err != nil {
			opened <- err
			return
		}
		p.s = s
		opened <- nil
		defer s.Close()
		for {
			r, err := s.Next()
			select {
			case p.ch <- pumped{r, err}:
			case <-ctx.Done():
				return // the verb has stopped reading
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case err := <-opened:
		if err != nil {
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Next returns the next request, the terminal error (io.EOF at the end)
// or ctx's error.
func (p *tracePump) Next() (*workload.Request, error) {
	if p.err != nil {
		return nil, p.err
	}
	select {
	case it := <-p.ch:
		p.err = it.err
		return it.r, it.err
	case <-p.ctx.Done():
		p.err = p.ctx.Err()
		return nil, p.err
	}
}

// Stream is the stream read; read its counts only after Next returned the
// terminal error. The pump closes it when it ends.
func (p *tracePump) Stream() *workload.Stream { return p.s }

// synthRNG is trace synth's random source for seed.
func synthRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x73796e7468)) }

// synthWarnBytes: trace synth warns before writing more than this.
const synthWarnBytes = 4e9

// synthSample is how many sessions synthWarnSize synthesizes to measure
// the size of one.
const synthSample = 20

// synthWarnSize warns on w when spec's sessions make more than
// synthWarnBytes of JSONL, estimated as sessions × the mean size of the
// first synthSample sessions synthesized alike (a session's requests carry
// its whole conversation so far, so its size depends on the spec's turns
// and lengths, not on how many sessions there are).
func synthWarnSize(ctx context.Context, w io.Writer, spec *workload.Spec, seed uint64, o workload.Options) error {
	if spec.Sessions <= synthSample {
		return nil
	}
	sp := *spec
	sp.Sessions = synthSample
	s, err := workload.NewSynthesizer(&sp, synthRNG(seed), o)
	if err != nil {
		return withExitCode(2, err)
	}
	var c countWriter
	if _, err := traceWriteJSONL(ctx, &c, nil, s); err != nil {
		return err
	}
	per := float64(c) / synthSample
	if total := per * float64(spec.Sessions); total > synthWarnBytes {
		fmt.Fprintf(w, "eppsim: warning: %d sessions make about %s of JSONL (%s per session, the mean of the first %d synthesized alike); interrupt to stop (a partial --out file is removed)\n",
			spec.Sessions, formatBytes(total), formatBytes(per), synthSample)
	}
	return nil
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// formatBytes prints n bytes with a decimal unit (kB, MB, GB, TB, PB).
func formatBytes(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
