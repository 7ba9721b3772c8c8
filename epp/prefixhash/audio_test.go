package prefixhash

import (
	"encoding/binary"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/eppsim/eppsim/epp"
)

// TestAudioPlaceholders checks spec §5.2.1 for audio: input_audio and
// audio_url blocks alike hash input_audio.data+format and count
// max(1, ceil(len(data+format)/4)) placeholder tokens; an audio_url
// block's URL is ignored and a string audio_url is an unknown key. The
// expected tokens are built here from the spec's formula: the text bytes
// zero-padded to 4, then count copies of the low 32 bits of xxh64(asset).
func TestAudioPlaceholders(t *testing.T) {
	tests := []struct {
		name  string
		block string
		asset string // the string whose xxh64 the placeholders carry
		count int
	}{
		{"input_audio", `{"type":"input_audio","input_audio":{"data":"QUJDREVG","format":"wav"}}`, "QUJDREVGwav", 3},
		{"audio_url reads input_audio, not its URL", `{"type":"audio_url","audio_url":{"url":"https://x/a.mp3"},"input_audio":{"data":"QUJDREVG","format":"wav"}}`,
			"QUJDREVGwav", 3},
		{"audio_url with only a URL", `{"type":"audio_url","audio_url":{"url":"https://x/a.mp3"}}`, "", 1},
		{"audio_url given as a string", `{"type":"audio_url","audio_url":"https://x/a.mp3"}`, "", 1},
		{"format only", `{"type":"input_audio","input_audio":{"format":"mp3"}}`, "mp3", 1},
		{"data only", `{"type":"input_audio","input_audio":{"data":"AAAAAAAA"}}`, "AAAAAAAA", 2},
		{"length 16: exactly 4", `{"type":"input_audio","input_audio":{"data":"0123456789abc","format":"wav"}}`, "0123456789abcwav", 4},
		{"length 17: rounds up to 5", `{"type":"input_audio","input_audio":{"data":"0123456789abcd","format":"wav"}}`, "0123456789abcdwav", 5},
		{"empty input_audio", `{"type":"input_audio","input_audio":{}}`, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},` + tt.block + `,{"type":"text","text":"!"}]}]}`
			if err := CheckBody(KindChatCompletions, []byte(body)); err != nil {
				t.Fatalf("body rejected: %v", err)
			}
			tr, err := (&Estimator{}).Tokenize("/v1/chat/completions", []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if want := max((len(tt.asset)+3)/4, 1); want != tt.count {
				t.Fatalf("table: count %d, formula gives %d", tt.count, want)
			}
			h := xxhash.Sum64String(tt.asset)
			// "user" "hi" padded to 8 bytes = 2 tokens, the placeholders,
			// then "!" padded.
			text := []byte("userhi\x00\x00")
			want := []uint32{binary.LittleEndian.Uint32(text[0:4]), binary.LittleEndian.Uint32(text[4:8])}
			for range tt.count {
				want = append(want, uint32(h))
			}
			want = append(want, uint32('!'))
			if len(tr.Prompts) != 1 || !slices.Equal(tr.Prompts[0], want) {
				t.Errorf("tokens\n got %v\nwant %v", tr.Prompts, want)
			}
			wantFeat := []epp.MultiModalFeature{{Modality: ModalityAudio, Hash: strconv.FormatUint(h, 16), Offset: 2, Count: tt.count}}
			if !slices.Equal(tr.MultiModal, wantFeat) {
				t.Errorf("features %+v, want %+v", tr.MultiModal, wantFeat)
			}
		})
	}
}
