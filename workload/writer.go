package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// WriteOpenAI writes r as one OpenAI Batch-API JSONL line with eppsim's
// replay fields (x_arrival_ms, x_session_id, x_turn, x_output_tokens,
// x_output_text, x_think_ms, x_stage when the stage is not 0, and
// x_headers when the request has headers), so that
// reading the line back gives the same request: the same body, prompt
// tokens, output, timing and stage.
func WriteOpenAI(w io.Writer, r *Request) error {
	if r.Body == nil {
		return errors.New("workload: request has no body (opened with NoTokens?)")
	}
	var b bytes.Buffer
	b.WriteString(`{"custom_id":"req-`)
	b.WriteString(strconv.FormatInt(r.ID, 10))
	b.WriteString(`","method":"POST","url":`)
	b.Write(jsonString(r.Endpoint))
	b.WriteString(`,"body":`)
	if err := json.Compact(&b, r.Body); err != nil {
		return fmt.Errorf("workload: request %d: body: %w", r.ID, err)
	}
	b.WriteString(`,"x_arrival_ms":`)
	b.WriteString(formatMillis(r.Arrival))
	if r.Session != "" {
		b.WriteString(`,"x_session_id":`)
		b.Write(jsonString(r.Session))
		b.WriteString(`,"x_turn":`)
		b.WriteString(strconv.Itoa(r.Turn))
	}
	b.WriteString(`,"x_output_tokens":`)
	b.WriteString(strconv.Itoa(r.OutputTokens))
	if r.OutputText != "" || (r.OutputTokenIDs != nil && r.OutputTokens > 0) {
		b.WriteString(`,"x_output_text":`)
		b.Write(marshalCompact(r.OutputText))
	}
	if r.AfterPrevious {
		b.WriteString(`,"x_think_ms":`)
		b.WriteString(formatMillis(r.ThinkTime))
	}
	if r.Stage != 0 {
		b.WriteString(`,"x_stage":`)
		b.WriteString(strconv.Itoa(r.Stage))
	}
	if len(r.Headers) > 0 {
		// Sorted keys keep the line deterministic.
		h, err := json.Marshal(r.Headers)
		if err != nil {
			return fmt.Errorf("workload: request %d: headers: %w", r.ID, err)
		}
		b.WriteString(`,"x_headers":`)
		b.Write(h)
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}
