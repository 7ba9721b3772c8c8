package producer

import (
	"reflect"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func TestRegisterAndDataKeys(t *testing.T) {
	r := epp.NewRegistry()
	Register(r)
	want := []string{
		"approx-prefix-cache-producer", "burst-prefix-cache-producer", "dcgm-data-source", "dcgm-extractor", "inflight-load-producer",
		"llm-d-v0.2-prefix-cache-scorer", "mm-embeddings-cache-producer", "precise-prefix-cache-producer", "precise-prefix-cache-scorer", "session-id-producer",
		"token-producer", "tokenizer",
	}
	if got := r.Types(); !reflect.DeepEqual(got, want) {
		t.Fatalf("types %v", got)
	}
	produces := map[string][]string{
		"approx-prefix-cache-producer":   {"PrefixCacheMatchInfoDataKey/approx-prefix-cache-producer"},
		"burst-prefix-cache-producer":    {"PrefixCacheMatchInfoDataKey/burst-prefix-cache-producer"},
		"inflight-load-producer":         {"InFlightLoadDataKey/inflight-load-producer", "UncachedRequestTokens/inflight-load-producer"},
		"mm-embeddings-cache-producer":   {"EncoderCacheMatchInfo/mm-embeddings-cache-producer"},
		"llm-d-v0.2-prefix-cache-scorer": {"PrefixCacheMatchInfoDataKey/llm-d-v0.2-prefix-cache-scorer"},
		"precise-prefix-cache-producer":  {"PrefixCacheMatchInfoDataKey/precise-prefix-cache-producer"},
		"precise-prefix-cache-scorer":    {"PrefixCacheMatchInfoDataKey/precise-prefix-cache-scorer"},
		"session-id-producer":            {"SessionID/session-id-producer", "BoundEndpoint/session-id-producer"},
		"token-producer":                 {"TokenizedPrompt/token-producer"},
		"tokenizer":                      {"TokenizedPrompt/tokenizer"},
	}
	consumes := map[string][]epp.Dependency{
		"approx-prefix-cache-producer":  {{Key: TokenizedPromptKey, Required: true}},
		"burst-prefix-cache-producer":   {{Key: TokenizedPromptKey, Required: true}},
		"mm-embeddings-cache-producer":  {{Key: TokenizedPromptKey, Required: true}},
		"precise-prefix-cache-producer": {{Key: TokenizedPromptKey, Required: true}},
		"precise-prefix-cache-scorer":   {{Key: TokenizedPromptKey, Required: false}},
		"inflight-load-producer": {
			{Key: TokenizedPromptKey, Required: true},
			{Key: epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}},
		},
	}
	for _, typ := range want {
		f, _ := r.Lookup(typ)
		p, err := f(typ, nil, epp.NewHandle(0))
		if err != nil {
			t.Errorf("%s with no parameters: %v", typ, err)
			continue
		}
		if p.Type() != typ || p.Name() != typ {
			t.Errorf("%s: type %s name %s", typ, p.Type(), p.Name())
		}
		if typ == DCGMSourceType || typ == DCGMExtractorType {
			continue // data-layer plugins (dcgm_test.go), not cycle producers
		}
		var keys []string
		for _, k := range p.(epp.DataProducer).Produces() {
			keys = append(keys, k.String())
		}
		if !reflect.DeepEqual(keys, produces[typ]) {
			t.Errorf("%s produces %v", typ, keys)
		}
		var deps []epp.Dependency
		if dc, ok := p.(epp.DataConsumer); ok {
			deps = dc.Consumes()
		}
		if !reflect.DeepEqual(deps, consumes[typ]) {
			t.Errorf("%s consumes %+v", typ, deps)
		}
		if _, ns := p.(epp.NotSimulated); ns {
			t.Errorf("%s is reported not simulated", typ)
		}
	}
}
