package workload

import (
	"fmt"
	"math"
)

// ClientPlan is how inference-perf's load generator sends an
// inference-perf config's traffic, the parameters of the client model that
// sim runs between the workload and the EPP (sim.Options.Client;
// docs/workloads.md, "Client concurrency" and "Between stages"). It
// follows inference-perf v0.2.0 (inference_perf/loadgen/load_generator.py):
//
//   - A stage puts all of its requests, in schedule order, on one queue
//     Lead before its schedule begins. Requests leave the queue in order,
//     each taking one of MaxConcurrency slots (num_workers processes ×
//     worker_max_concurrency semaphore permits); one that leaves early
//     holds its slot while it sleeps until its scheduled time, one that
//     leaves late is sent at once. A slot frees when its request ends,
//     however it ends. The request's clock (TTFT, E2E) starts when it is
//     sent, not when it was scheduled.
//   - A request that has not ended Timeout after it was sent fails: the
//     client drops the connection and the server aborts it.
//   - The load generator polls, every Poll from the stage's enqueueing,
//     whether the stage's requests have all ended; the first poll that
//     finds them so ends the stage. The next stage is enqueued Interval
//     later, and its schedule begins Lead after that.
//
// Times are ns of simulated time.
type ClientPlan struct {
	// MaxConcurrency caps the requests out of the queue and not yet ended
	// (0: no cap).
	MaxConcurrency int
	// NumWorkers and WorkerMaxConcurrency are the two factors of
	// MaxConcurrency as resolved (the config's or inference-perf's
	// defaults); MaxConcurrency is their product unless overridden.
	NumWorkers, WorkerMaxConcurrency int
	// Timeout is the HTTP client's total timeout per request (0: none).
	Timeout int64
	// Interval is load.interval; Lead the time between a stage's
	// enqueueing and its schedule's start (1 s); Poll the period of the
	// load generator's completion check (1 s).
	Interval, Lead, Poll int64
	// StageRequests is the number of requests of each stage, in order
	// (Request.Stage indexes it).
	StageRequests []int
	// Streaming is api.streaming; UsageChunk whether a stream ends with a
	// usage chunk (the bodies ask for one: stream_options.include_usage).
	Streaming, UsageChunk bool
}

// Defaults of inference-perf's client (docs/workloads.md).
const (
	// DefaultIPerfCPUs stands for the load generator machine's CPU count
	// (Python's os.cpu_count(), the host's, not a container's limit), from
	// which inference-perf v0.2.0 defaults num_workers: the count of the
	// recorded runs (../shared/latency: their resolved configs give
	// num_workers 224).
	DefaultIPerfCPUs = 224
	// DefaultIPerfWorkerMaxConcurrency is v0.2.0's default
	// worker_max_concurrency.
	DefaultIPerfWorkerMaxConcurrency = 100
	// DefaultIPerfRequestTimeout is aiohttp's default total timeout
	// (ClientTimeout(total=300)), which v0.2.0's per-request ClientSession
	// uses: v0.2.0 has no request timeout of its own (load.request_timeout
	// came with v0.3.0 and, unset, keeps aiohttp's default).
	DefaultIPerfRequestTimeout = 300e9
	iperfLead                  = 1e9
	iperfPoll                  = 1e9
)

// checkClient checks the client fields of o.
func (o *InferencePerfOptions) checkClient() error {
	switch {
	case o.CPUs < 0:
		return fmt.Errorf("inference-perf CPU count %d: must be > 0", o.CPUs)
	case o.MaxConcurrency < 0:
		return fmt.Errorf("inference-perf max concurrency %d: must be > 0 (or 0 for the config's)", o.MaxConcurrency)
	case o.RequestTimeout < 0:
		return fmt.Errorf("inference-perf request timeout %v: must be > 0 (or 0 for the default)", o.RequestTimeout)
	}
	return nil
}

// iperfClient resolves the client model of cfg under o (nil with
// o.OpenLoop).
func iperfClient(cfg *InferencePerfConfig, o *InferencePerfOptions) *ClientPlan {
	if o.OpenLoop {
		return nil
	}
	l := cfg.Load
	p := &ClientPlan{NumWorkers: l.NumWorkers, WorkerMaxConcurrency: l.WorkerMaxConcurrency,
		Interval: int64(math.Round(l.Interval * 1e9)), Lead: iperfLead, Poll: iperfPoll}
	if !cfg.Load.HasNumWorkers {
		// num_workers: int = max(1, cpu_count()) (config.py, v0.2.0)
		p.NumWorkers = max(1, o.CPUs)
		if o.CPUs == 0 {
			p.NumWorkers = DefaultIPerfCPUs
		}
	}
	if p.WorkerMaxConcurrency == 0 {
		p.WorkerMaxConcurrency = DefaultIPerfWorkerMaxConcurrency
	}
	// num_workers: 0 runs inference-perf's single-process path, which has
	// no semaphore.
	if p.NumWorkers > 0 {
		p.MaxConcurrency = int(min(int64(p.NumWorkers)*int64(p.WorkerMaxConcurrency), math.MaxInt32))
	}
	if o.MaxConcurrency > 0 {
		p.MaxConcurrency = o.MaxConcurrency
	}
	switch {
	case o.RequestTimeout > 0:
		p.Timeout = o.RequestTimeout
	case l.RequestTimeout > 0:
		p.Timeout = int64(math.Round(l.RequestTimeout * 1e9))
	default:
		p.Timeout = DefaultIPerfRequestTimeout
	}
	// The bodies carry stream_options.include_usage whenever they stream
	// (iperfReader.prompt).
	p.Streaming, p.UsageChunk = cfg.API.Streaming, cfg.API.Streaming
	for _, st := range l.Stages {
		p.StageRequests = append(p.StageRequests, st.Requests())
	}
	return p
}

// client is the stream's client model (Stream.Client).
func (r *iperfReader) client() *ClientPlan { return iperfClient(r.cfg, &r.opt.InferencePerf) }
