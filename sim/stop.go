package sim

// StopFunc decides, as each request's record becomes final, whether the
// run's outcome is already decided: a non-empty reason stops the run there
// (a capacity search's SLO that no later record can rescue, for example).
// It sees every final record, warm-up and rejected ones included, after
// Options.OnRecord, and must not keep the record.
type StopFunc func(*Record) string

// Stopped says that and why a run ended before its workload did: the
// StopFunc's reason, the simulated time of the record that decided it, and
// the requests final by then. The rest of the Result covers the run up to
// that instant only (requests still in flight are Result.InFlight), so it
// is no measurement of the whole workload.
type Stopped struct {
	Reason string
	At     int64
	Final  int
}

// checkStop asks the run's StopFunc about rec and halts the run when it
// answers: nothing more is read, and the loop ends after this event.
func (r *runner) checkStop(rec *Record) {
	if r.opts.Stop == nil || r.res.Stopped != nil {
		return
	}
	why := r.opts.Stop(rec)
	if why == "" {
		return
	}
	r.res.Stopped = &Stopped{Reason: why, At: r.loop.Now(), Final: r.res.Completed + r.res.Rejected}
	r.srcDone = true
	r.next = nil
	r.loop.Halt()
}
