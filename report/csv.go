package report

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/sim"
)

// appendField appends s as one CSV field, quoted (RFC 4180, as
// encoding/csv quotes) when it holds a comma, quote, CR or LF or starts
// with a space or tab.
func appendField(b []byte, s string) []byte {
	if s == "" || (!strings.ContainsAny(s, ",\"\r\n") && s[0] != ' ' && s[0] != '\t') {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// Fixed numeric formats keep the CSV files byte-deterministic.
func appendSeconds(b []byte, ns int64) []byte {
	return strconv.AppendFloat(b, float64(ns)/1e9, 'f', 6, 64)
}

func appendMillis(b []byte, ns int64) []byte {
	return strconv.AppendFloat(b, float64(ns)/1e6, 'f', 3, 64)
}

func appendFraction(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'f', 6, 64)
}

func appendBool(b []byte, v bool) []byte {
	return strconv.AppendBool(b, v)
}

// appendRequestRow appends rec's requests.csv row without its replica
// column; the row is b[:split] + replica + b[split:] (b[split:] ends with
// the newline). Latency columns are empty unless the request completed;
// predicted columns are empty when the record has no prediction.
func appendRequestRow(b []byte, config string, rec *sim.Record) ([]byte, int) {
	b = appendField(b, config)
	b = append(b, ',')
	b = strconv.AppendInt(b, rec.ID, 10)
	b = append(b, ',')
	b = appendField(b, rec.Session)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.Turn), 10)
	b = append(b, ',')
	b = appendSeconds(b, rec.Arrival)
	b = append(b, ',')
	split := len(b)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.PromptTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.OutputTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.CachedTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.OracleCachedTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.RoutedCachedTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.InfiniteCachedTokens), 10)
	b = append(b, ',')
	if rec.HasPredicted {
		b = appendFraction(b, rec.Predicted)
	}
	b = append(b, ',')
	if rec.HasPrecise {
		b = appendFraction(b, rec.PredictedPrecise)
	}
	b = append(b, ',')
	if rec.Outcome == sim.Completed {
		b = appendMillis(b, rec.TTFT)
		b = append(b, ',')
		b = appendMillis(b, rec.E2E)
		b = append(b, ',')
		b = appendMillis(b, rec.Queue)
	} else {
		b = append(b, ",,"...)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.Preemptions), 10)
	b = append(b, ',')
	b = appendBool(b, rec.Tied)
	b = append(b, ',')
	b = appendField(b, string(rec.Outcome))
	b = append(b, ',')
	b = appendField(b, rec.Reason)
	b = append(b, ',')
	b = appendBool(b, rec.Warmup)
	b = append(b, '\n')
	return b, split
}

// appendPDColumns appends rec's PDColumns (empty without a P/D part; the
// legs' and transfer's columns empty unless the request completed
// disaggregated) and the row's newline. names are the fleet's replica
// names.
func appendPDColumns(b []byte, rec *sim.Record, names []string) []byte {
	pd := rec.PD
	if pd == nil {
		return append(b, ",,,,,,,,,,,,,,,\n"...)
	}
	b = append(b, ',')
	b = appendBool(b, pd.Disaggregated)
	b = append(b, ',')
	b = appendField(b, pd.Reason)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pd.DeciderPromptTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pd.DeciderCachedTokens), 10)
	b = append(b, ',')
	b = appendField(b, replicaName(names, pd.PrefillReplica))
	done := rec.Outcome == sim.Completed
	for _, v := range []struct {
		ns   int64
		show bool
	}{
		{pd.PrefillQueue, done && pd.Disaggregated}, {pd.PrefillTime, done && pd.Disaggregated},
		{pd.DecodeQueue, done}, {pd.TransferTime, done && pd.Disaggregated}, {pd.PullWait, done && pd.Disaggregated},
		{pd.DecodeTime, done},
	} {
		b = append(b, ',')
		if v.show {
			b = appendMillis(b, v.ns)
		}
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pd.PulledBlocks), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, pd.TransferBytes, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pd.DecodeHitTokens), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pd.DecodeRoutedTokens), 10)
	return append(b, '\n')
}

// appendSampleRow appends s's timeseries.csv row without its replica
// column (split as in appendRequestRow). dh and dq are the hits and
// queries since the replica's previous sample; hit_ratio is empty when dq
// is 0.
func appendSampleRow(b []byte, config string, s *sim.Sample, dh, dq int64) ([]byte, int) {
	b = appendField(b, config)
	b = append(b, ',')
	b = appendSeconds(b, s.Time)
	b = append(b, ',')
	split := len(b)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(s.Waiting), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(s.Running), 10)
	b = append(b, ',')
	b = appendFraction(b, s.KVUsage)
	b = append(b, ',')
	if dq != 0 {
		b = appendFraction(b, float64(dh)/float64(dq))
	}
	b = append(b, '\n')
	return b, split
}

// spool holds a run's CSV rows until the replica names are known. Each
// entry is uvarint(len prefix) prefix varint(replica) uvarint(len suffix)
// suffix.
type spool struct {
	name string // the CSV file the rows belong to
	f    *os.File
	w    *bufio.Writer
	tmp  [binary.MaxVarintLen64]byte
}

func newSpool(dir, name string) (*spool, error) {
	f, err := os.CreateTemp(dir, "."+name+".spool.*.tmp")
	if err != nil {
		return nil, fmt.Errorf("report: writing %s: %w", name, err)
	}
	return &spool{name: name, f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (s *spool) put(prefix []byte, replica int, suffix []byte) {
	s.w.Write(s.tmp[:binary.PutUvarint(s.tmp[:], uint64(len(prefix)))])
	s.w.Write(prefix)
	s.w.Write(s.tmp[:binary.PutVarint(s.tmp[:], int64(replica))])
	s.w.Write(s.tmp[:binary.PutUvarint(s.tmp[:], uint64(len(suffix)))])
	s.w.Write(suffix)
}

// drain copies the spooled rows into dst with the replica names resolved,
// then removes the spool.
func (s *spool) drain(dst *tempCSV, names []string) (err error) {
	defer s.remove()
	wrap := func(err error) error { return fmt.Errorf("report: writing %s (spool): %w", s.name, err) }
	if err := s.w.Flush(); err != nil {
		return wrap(err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return wrap(err)
	}
	rd := bufio.NewReaderSize(s.f, 1<<16)
	var prefix, suffix []byte
	readBytes := func(buf []byte) ([]byte, error) {
		n, err := binary.ReadUvarint(rd)
		if err != nil {
			return buf, err
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		_, err = io.ReadFull(rd, buf)
		return buf, err
	}
	for {
		prefix, err = readBytes(prefix)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrap(err)
		}
		replica, err := binary.ReadVarint(rd)
		if err != nil {
			return wrap(err)
		}
		if suffix, err = readBytes(suffix); err != nil {
			return wrap(err)
		}
		dst.writeRow(prefix, replicaName(names, int(replica)), suffix)
	}
}

func (s *spool) remove() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
		s.f = nil
	}
}
