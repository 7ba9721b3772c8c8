package config_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/epp/producer"
)

const benchCopies = "../../testdata/shared/benchmarks"

func realOpts(release string) config.Options {
	return config.Options{Registry: plugins.Builtin(), Seed: 1, Release: release}
}

// publishedCase is what loading one published config must do.
type publishedCase struct {
	// kinds are the translations in order: api, kv (kv-cache-scorer),
	// est (estimate mode), ct (cache_tracking), rel (to the release type).
	kinds, releaseKinds []string
	// prefixType is the type of the plugin named prefix-cache-scorer or
	// precise-prefix-cache-scorer after loading, without and with the
	// release ("" when there is none).
	prefixType, releaseType string
}

var (
	estimateCase = publishedCase{[]string{"api", "est", "kv"}, []string{"api", "rel", "kv"}, "prefix-cache-scorer", producer.V02PrefixCacheScorerType}
	preciseCase  = publishedCase{[]string{"api", "ct", "kv"}, []string{"api", "rel", "kv"}, "precise-prefix-cache-scorer", producer.V02PrefixCacheScorerType}
	loadCase     = publishedCase{[]string{"api", "kv"}, []string{"api", "kv"}, "", ""}
	randomCase   = publishedCase{[]string{"api"}, []string{"api"}, "", ""}
)

// publishedCases covers every EndpointPickerConfig of ../shared/benchmarks
// (their copies in testdata/shared/benchmarks).
var publishedCases = map[string]publishedCase{
	"73-capacity/estimated-scheduling.yaml":                                        estimateCase,
	"73-capacity/load-scheduling.yaml":                                             loadCase,
	"73-capacity/precise-scheduling.yaml":                                          preciseCase,
	"73-capacity/random-scheduling.yaml":                                           randomCase,
	"cache-overload-60-users-4k-tokens/baseline.yaml":                              randomCase,
	"cache-overload-60-users-4k-tokens/estimate-prefix-cache.yaml":                 estimateCase,
	"cache-overload-60-users-4k-tokens/load.yaml":                                  loadCase,
	"cache-overload-60-users-4k-tokens/precise-prefix-cache.yaml":                  preciseCase,
	"cache-overload-80-users-3k-tokens/load.yaml":                                  loadCase,
	"cache-overload-80-users-3k-tokens/precise-prefix-cache.yaml":                  preciseCase,
	"cache-overload-80-users-3k-tokens/prefix-cache-estimate.yaml":                 estimateCase,
	"cache-overload-80-users-3k-tokens/random-routing.yaml":                        randomCase,
	"medium-scale-frequent-evictions/baseline.yaml":                                randomCase,
	"medium-scale-frequent-evictions/estimate-prefix-cache.yaml":                   estimateCase,
	"medium-scale-frequent-evictions/load.yaml":                                    loadCase,
	"medium-scale-frequent-evictions/precise-prefix-cache.yaml":                    preciseCase,
	"medium-scale-frequent-evictions-60-users-high-qps/estimate-prefix-cache.yaml": estimateCase,
	"medium-scale-frequent-evictions-60-users-high-qps/load.yaml":                  loadCase,
	"medium-scale-frequent-evictions-60-users-high-qps/precise-prefix-cache.yaml":  preciseCase,
	"medium-scale-frequent-evictions-60-users-high-qps/random-routing.yaml":        randomCase,
	"standard-scale-64p-cache-load/estimate-prefix-cache.yaml":                     estimateCase,
	"standard-scale-64p-cache-load/load.yaml":                                      loadCase,
	"standard-scale-64p-cache-load/precise-prefix-cache.yaml":                      preciseCase,
	"standard-scale-64p-cache-load/random.yaml":                                    randomCase,
	"standard-scale-75p-cache-load/estimate-prefix-cache.yaml":                     estimateCase,
	"standard-scale-75p-cache-load/load.yaml":                                      loadCase,
	"standard-scale-75p-cache-load/precise-prefix-cache.yaml":                      preciseCase,
	"standard-scale-75p-cache-load/random.yaml":                                    randomCase,
}

func kindOf(tr config.Translation) string {
	switch {
	case tr.Path == "apiVersion":
		return "api"
	case strings.Contains(tr.Text, "→ "+producer.V02PrefixCacheScorerType):
		return "rel"
	case strings.Contains(tr.Text, "kv-cache-scorer →"):
		return "kv"
	case strings.Contains(tr.Text, "estimate mode"):
		return "est"
	case strings.Contains(tr.Text, "cache_tracking mode"):
		return "ct"
	}
	return "?"
}

// TestPublishedConfigsLoad: every EndpointPickerConfig of the published
// benchmarks loads, translated, with one warning per translation (and a
// "behaviour differs" note naming --epp-release where the prefix scorer
// changes), both without and with --epp-release llm-d-v0.2. It reads the
// copies in testdata and, when ../shared is there, the originals (which
// must be the same set).
func TestPublishedConfigsLoad(t *testing.T) {
	roots := []string{benchCopies}
	if _, err := os.Stat(filepath.Join(sharedRoot, "benchmarks")); err == nil {
		roots = append(roots, filepath.Join(sharedRoot, "benchmarks"))
	} else {
		t.Logf("%s/benchmarks is absent (a fresh clone): checking the copies in %s only", sharedRoot, benchCopies)
	}
	for _, root := range roots {
		files, err := publishedConfigs(filepath.Dir(root))
		if err != nil || len(files) != len(publishedCases) {
			t.Fatalf("%s: %d configs (%v), want %d", root, len(files), err, len(publishedCases))
		}
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			rel = filepath.ToSlash(rel)
			want, ok := publishedCases[rel]
			if !ok {
				t.Errorf("%s: no expectation for %s", root, rel)
				continue
			}
			for _, release := range []string{"", config.ReleaseLLMDv02} {
				l, err := config.LoadFile(f, realOpts(release))
				if err != nil {
					t.Errorf("%s (release %q): %v", f, release, err)
					continue
				}
				kinds, prefixType := want.kinds, want.prefixType
				if release != "" {
					kinds, prefixType = want.releaseKinds, want.releaseType
				}
				var got []string
				for _, tr := range l.Translations {
					got = append(got, kindOf(tr))
					if tr.Line <= 0 {
						t.Errorf("%s: translation without a line: %s", rel, tr)
					}
				}
				wantKinds := slices.Clone(kinds)
				if len(kinds) == 1 {
					wantKinds = nil // the apiVersion alone: valid today, loaded as before
				}
				slices.Sort(got)
				slices.Sort(wantKinds)
				if !slices.Equal(got, wantKinds) {
					t.Errorf("%s (release %q): translations %v, want %v", rel, release, got, wantKinds)
				}
				warned := 0
				for _, w := range l.Warnings {
					if strings.HasPrefix(w, "older schema, translated: line ") {
						warned++
						if (strings.Contains(w, "estimate mode (") || strings.Contains(w, "cache_tracking mode →")) && !strings.Contains(w, "behaviour differs") && !strings.Contains(w, "--epp-release "+config.ReleaseLLMDv02) {
							t.Errorf("%s: a behaviour-changing translation without its note: %s", rel, w)
						}
					}
				}
				if warned != len(kinds)-1 {
					t.Errorf("%s (release %q): %d translation warnings, want %d: %q", rel, release, warned, len(kinds)-1, l.Warnings)
				}
				wantMW := len(kinds)
				if release != "" && !slices.Contains(kinds, "rel") {
					wantMW++ // "release ... changes nothing"
				} else if len(kinds) == 1 {
					wantMW = 0
				}
				if mw := l.MigrationWarnings(); len(mw) != wantMW {
					t.Errorf("%s (release %q): migration warnings %q", rel, release, mw)
				}
				if prefixType != "" {
					found := ""
					for _, p := range l.Plugins {
						if p.Name == "prefix-cache-scorer" && p.Type != "prefix-cache-scorer" || p.Type == prefixType {
							found = p.Type
						}
					}
					if found != prefixType {
						t.Errorf("%s (release %q): prefix plugin type %q, want %q", rel, release, found, prefixType)
					}
				}
			}
		}
	}
}

// migrateGolden: a published config, the release option, the hand-written
// expected document (without comments) and, in order, the start of each
// comment's first line with the document line right below it.
var migrateGolden = []struct {
	src, release, want string
	comments           [][2]string
}{
	{"73-capacity/estimated-scheduling.yaml", "", "73-estimated-scheduling.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion inference.networking.x-k8s.io/v1alpha1 →", "apiVersion: llm-d.ai/v1alpha1"},
		{"# eppsim epp migrate: line 6: prefix-cache-scorer estimate mode (hashBlockSize 64 characters,", "- type: prefix-cache-scorer"},
		{"# eppsim epp migrate: line 10: plugin type kv-cache-scorer → kv-cache-utilization-scorer", "- type: kv-cache-utilization-scorer"},
	}},
	{"73-capacity/estimated-scheduling.yaml", config.ReleaseLLMDv02, "73-estimated-scheduling.release.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion", "apiVersion: llm-d.ai/v1alpha1"},
		{"# eppsim epp migrate: line 5: plugin type prefix-cache-scorer (estimate mode) →", "- name: prefix-cache-scorer"},
		{"# eppsim epp migrate: line 10: plugin type kv-cache-scorer", "- type: kv-cache-utilization-scorer"},
	}},
	{"standard-scale-64p-cache-load/estimate-prefix-cache.yaml", "", "64p-estimate-prefix-cache.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion", "apiVersion: llm-d.ai/v1alpha1"},
		{"# eppsim epp migrate: line 5: plugin type kv-cache-scorer", "- type: kv-cache-utilization-scorer"},
		{"# eppsim epp migrate: line 7: prefix-cache-scorer estimate mode (hashBlockSize 256 characters,", "- type: prefix-cache-scorer"},
	}},
	{"73-capacity/precise-scheduling.yaml", "", "73-precise-scheduling.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion", "apiVersion: llm-d.ai/v1alpha1"},
		{"# eppsim epp migrate: line 7: prefix-cache-scorer cache_tracking mode →", "- type: precise-prefix-cache-scorer"},
		{"# eppsim epp migrate: line 15: plugin type kv-cache-scorer", "- type: kv-cache-utilization-scorer"},
	}},
	{"73-capacity/precise-scheduling.yaml", config.ReleaseLLMDv02, "73-precise-scheduling.release.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion", "apiVersion: llm-d.ai/v1alpha1"},
		{"# eppsim epp migrate: line 5: plugin type prefix-cache-scorer (cache_tracking mode) →", "- name: prefix-cache-scorer"},
		{"# eppsim epp migrate: line 15: plugin type kv-cache-scorer", "- type: kv-cache-utilization-scorer"},
	}},
	{"cache-overload-60-users-4k-tokens/precise-prefix-cache.yaml", "", "20tok-precise-prefix-cache.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion", "apiVersion: llm-d.ai/v1alpha1"},
		{"# eppsim epp migrate: line 7: prefix-cache-scorer cache_tracking mode →", "- type: precise-prefix-cache-scorer"},
		{"# eppsim epp migrate: line 14: plugin type kv-cache-scorer", "- type: kv-cache-utilization-scorer"},
	}},
	{"73-capacity/random-scheduling.yaml", "", "73-random-scheduling.yaml", [][2]string{
		{"# eppsim epp migrate: line 1: apiVersion", "apiVersion: llm-d.ai/v1alpha1"},
	}},
}

// TestMigrateGolden compares Migrate's output with hand-written expected
// documents: the YAML without its comments must equal the file, and each
// translation's comment must sit right above the entry it changed.
func TestMigrateGolden(t *testing.T) {
	for _, g := range migrateGolden {
		t.Run(g.want, func(t *testing.T) {
			m, err := config.MigrateFile(filepath.Join(benchCopies, g.src), config.MigrateOptions{Release: g.release})
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "migrate", g.want))
			if err != nil {
				t.Fatal(err)
			}
			var body []string
			var comments [][2]string
			lines := strings.Split(string(m.YAML), "\n")
			if !strings.HasPrefix(lines[0], "# Translated from ") {
				t.Errorf("header %q", lines[0])
			}
			for i, l := range lines {
				trimmed := strings.TrimLeft(l, " ")
				if strings.HasPrefix(trimmed, "#") {
					if strings.HasPrefix(trimmed, "# eppsim epp migrate: ") {
						next := i + 1
						for next < len(lines) && strings.HasPrefix(strings.TrimLeft(lines[next], " "), "#") {
							next++
						}
						comments = append(comments, [2]string{trimmed, lines[next]})
					}
					continue
				}
				body = append(body, l)
			}
			if got := strings.Join(body, "\n"); got != string(want) {
				t.Errorf("document:\n%s\nwant (%s):\n%s", got, g.want, want)
			}
			if len(comments) != len(g.comments) || len(m.Translations) != len(g.comments) {
				t.Fatalf("%d comments, %d translations, want %d:\n%s", len(comments), len(m.Translations), len(g.comments), m.YAML)
			}
			for i, c := range comments {
				if !strings.HasPrefix(c[0], g.comments[i][0]) || c[1] != g.comments[i][1] {
					t.Errorf("comment %d: %q above %q, want %q… above %q", i, c[0], c[1], g.comments[i][0], g.comments[i][1])
				}
			}
			// The translation loads, and is today's schema: migrating it
			// again changes nothing.
			if _, err := config.Load(m.YAML, realOpts(g.release)); err != nil {
				t.Errorf("translation does not load: %v", err)
			}
			again, err := config.Migrate(m.YAML, config.MigrateOptions{})
			if err != nil || len(again.Translations) != 0 || !bytes.Equal(again.YAML, m.YAML) {
				t.Errorf("second migration: %v, %v", err, again)
			}
		})
	}
}

// TestMigrateTodaySchemaUnchanged: a config of today's schema (every
// shipped one) has nothing to translate but, where it has it, the
// deprecated apiVersion; it is written back byte for byte otherwise, and
// loads with no translations and no extra warnings either way.
func TestMigrateTodaySchemaUnchanged(t *testing.T) {
	for _, f := range sharedFiles(t) {
		data, _ := os.ReadFile(f)
		m, err := config.Migrate(data, config.MigrateOptions{File: f})
		if err != nil {
			if filepath.Base(f) == mmConfig {
				continue // does not decode upstream either (see mmConfig)
			}
			t.Errorf("%s: %v", f, err)
			continue
		}
		oldAPI := bytes.Contains(data, []byte("apiVersion: "+config.DeprecatedAPIVersion))
		switch {
		case oldAPI && (len(m.Translations) != 1 || m.Translations[0].Path != "apiVersion"):
			t.Errorf("%s (deprecated apiVersion): translated %v", f, m.Translations)
		case !oldAPI && (len(m.Translations) != 0 || !bytes.Equal(m.YAML, data)):
			t.Errorf("%s: translated %v", f, m.Translations)
		}
		l, err := config.Load(data, realOpts(""))
		if err != nil {
			continue // covered by the loader's own tests
		}
		for _, w := range l.Warnings {
			if strings.HasPrefix(w, "older schema") {
				t.Errorf("%s: %s", f, w)
			}
		}
		if len(l.Translations) != 0 || len(l.MigrationWarnings()) != 0 {
			t.Errorf("%s: translations %v", f, l.Translations)
		}
	}
}

const oldHead = "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n"

// TestMigrateErrors: what cannot be translated is refused with file, line,
// field and what to do.
func TestMigrateErrors(t *testing.T) {
	cases := []struct {
		name, doc, release string
		want               []string
	}{
		{"mixed parameters", oldHead + "- type: prefix-cache-scorer\n  parameters:\n    hashBlockSize: 64\n    matchLengthWeight: 0.5\n", "",
			[]string{"old.yaml:7: plugins[0].parameters.matchLengthWeight:", "mixes llm-d-inference-scheduler v0.2.x parameters (hashBlockSize)", "keep one set"}},
		{"unknown parameter", oldHead + "- type: prefix-cache-scorer\n  parameters:\n    hashBlockSize: 64\n    blockChars: 4\n", "",
			[]string{"old.yaml:7: plugins[0].parameters.blockChars:", "not one llm-d-inference-scheduler v0.2.x knew", "delete it"}},
		{"unknown nested parameter", oldHead + "- type: prefix-cache-scorer\n  parameters:\n    mode: cache_tracking\n    indexerConfig:\n      tokenProcessorConfig:\n        blockSize: 64\n        seed: \"1\"\n", "",
			[]string{"old.yaml:10: plugins[0].parameters.indexerConfig.tokenProcessorConfig.seed:", "delete it"}},
		{"bad mode", oldHead + "- type: prefix-cache-scorer\n  parameters:\n    mode: exact\n", "",
			[]string{"old.yaml:6: plugins[0].parameters.mode:", `mode "exact"`, "estimate (the default) and cache_tracking"}},
		{"zero block size", oldHead + "- type: prefix-cache-scorer\n  parameters:\n    hashBlockSize: 0\n", config.ReleaseLLMDv02,
			[]string{"old.yaml:6: plugins[0].parameters.hashBlockSize:", "hashBlockSize must be > 0", "set a positive value (the v0.2.x default is 64)"}},
		{"other mode's parameter", oldHead + "- type: prefix-cache-scorer\n  parameters:\n    mode: cache_tracking\n    lruCapacityPerServer: 5\n", "",
			[]string{"old.yaml:7: plugins[0].parameters.lruCapacityPerServer:", "belongs to mode estimate", "delete it"}},
		{"unknown release", oldHead + "- type: queue-scorer\n", "llm-d-v0.1", []string{`unknown release "llm-d-v0.1"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, run := range []func() error{
				func() error {
					_, err := config.Migrate([]byte(tc.doc), config.MigrateOptions{File: "old.yaml", Release: tc.release})
					return err
				},
				func() error {
					o := realOpts(tc.release)
					o.File = "old.yaml"
					_, err := config.Load([]byte(tc.doc), o)
					return err
				},
			} {
				err := run()
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				var ce *config.Error
				if tc.release != "llm-d-v0.1" && (!errors.As(err, &ce) || !errors.Is(err, config.ErrOldSchema)) {
					t.Errorf("error %v is not a located ErrOldSchema", err)
				}
			}
		})
	}
}

// TestMigrateNamesAndRefs: a renamed plugin whose name defaulted to its
// type takes the new type's name and its references follow, unless the
// name is taken; a second estimate-mode scorer gets a producer of its own.
func TestMigrateNamesAndRefs(t *testing.T) {
	doc := oldHead + `- type: kv-cache-scorer
- type: prefix-cache-scorer
  parameters: {hashBlockSize: 256}
- name: second
  type: prefix-cache-scorer
  parameters: {lruCapacityPerServer: 100}
- type: max-score-picker
schedulingProfiles:
- name: a
  plugins:
  - pluginRef: kv-cache-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
- name: b
  plugins:
  - pluginRef: second
- name: c
  plugins:
  - pluginRef: kv-cache-scorer
`
	withHandler := strings.Replace(doc, "- type: max-score-picker\n", "- type: max-score-picker\n- type: pd-profile-handler\n", 1)
	m, err := config.Migrate([]byte(withHandler), config.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y := string(m.YAML)
	for _, want := range []string{
		"  - pluginRef: kv-cache-utilization-scorer\n    weight: 2\n",
		"- name: c\n  plugins:\n  - pluginRef: kv-cache-utilization-scorer\n",
		// 31250 blocks of 256 characters are 31250 blocks of 64 tokens.
		"- type: approx-prefix-cache-producer\n  parameters:\n    autoTune: false\n    blockSizeTokens: 64\n    maxPrefixTokensToMatch: 16384\n    lruCapacityPerServer: 31250\n",
		"- name: second\n  type: prefix-cache-scorer\n  parameters:\n    prefixMatchInfoProducerName: approx-prefix-cache-producer-2\n",
		"- name: approx-prefix-cache-producer-2\n  type: approx-prefix-cache-producer\n  parameters:\n    autoTune: false\n    blockSizeTokens: 16\n    maxPrefixTokensToMatch: 4096\n    lruCapacityPerServer: 25\n",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("translation lacks\n%s\nin\n%s", want, y)
		}
	}
	if strings.Contains(y, "pluginRef: kv-cache-scorer") {
		t.Errorf("a reference to kv-cache-scorer is left:\n%s", y)
	}
	// A taken name keeps the old one explicitly.
	taken := oldHead + "- type: kv-cache-scorer\n- name: kv-cache-utilization-scorer\n  type: queue-scorer\n"
	m, err = config.Migrate([]byte(taken), config.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.YAML), "- name: kv-cache-scorer\n  type: kv-cache-utilization-scorer\n") {
		t.Errorf("taken name:\n%s", m.YAML)
	}
}

// FuzzMigrate: the migrator parses outside input. It never panics; what it
// translates is today's schema (migrating it again changes nothing); and a
// document that loads still loads after migration.
func FuzzMigrate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(benchCopies, "*", "*.yaml"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b, false)
		}
	}
	f.Add([]byte(oldHead+"- type: prefix-cache-scorer\n  parameters: {mode: cache_tracking, indexerConfig: {kvBlockIndexConfig: {inMemoryConfig: {size: 5}}}, kvEventsConfig: {concurrency: 2}}\n"), true)
	f.Add([]byte(oldHead+"- type: prefix-cache-scorer\n- type: kv-cache-scorer\n  name: kv-cache-scorer\n"), true)
	f.Add([]byte(oldHead+"- type: prefix-cache-scorer\n  parameters: [1]\n"), false)
	f.Add([]byte(oldHead+"- type: prefix-cache-scorer\n  parameters: {hashBlockSize: 1e30}\n"), false)
	reg := plugins.Builtin()
	f.Fuzz(func(t *testing.T, data []byte, rel bool) {
		release := ""
		if rel {
			release = config.ReleaseLLMDv02
		}
		m, err := config.Migrate(data, config.MigrateOptions{File: "fuzz.yaml", Release: release})
		if err != nil {
			return
		}
		if len(m.Translations) > 0 {
			again, err := config.Migrate(m.YAML, config.MigrateOptions{})
			if err != nil || len(again.Translations) != 0 {
				t.Fatalf("migrating the translation again: %v %v\n%s", err, again, m.YAML)
			}
		}
		o := config.Options{Registry: reg, Seed: 1, Release: release}
		if _, err := config.Load(data, o); err == nil {
			if _, err := config.Load(m.YAML, o); err != nil {
				t.Fatalf("loads, but its translation does not: %v\n%s\n--- from\n%s", err, m.YAML, data)
			}
		}
	})
}

// TestMigrateBarePrefixScorer: a prefix-cache-scorer without parameters is
// v0.2.x's estimate with defaults only in a document of that era.
func TestMigrateBarePrefixScorer(t *testing.T) {
	bare := oldHead + "- type: prefix-cache-scorer\n- type: max-score-picker\n- type: single-profile-handler\n"
	withKV := bare + "- type: kv-cache-scorer\n"
	cases := []struct {
		doc, release string
		want         string // "" = left as today's
	}{
		{bare, "", ""},
		{bare, config.ReleaseLLMDv02, "→ " + producer.V02PrefixCacheScorerType},
		{withKV, "", "estimate mode (hashBlockSize 64 characters, maxPrefixBlocksToMatch 256, lruCapacityPerServer 31250)"},
		{strings.Replace(withKV, "inference.networking.x-k8s.io", "llm-d.ai", 1), "", ""},
	}
	for i, tc := range cases {
		m, err := config.Migrate([]byte(tc.doc), config.MigrateOptions{Release: tc.release})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got := ""
		for _, tr := range m.Translations {
			if strings.Contains(tr.Path, "plugins[0]") {
				got = tr.Text
			}
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("case %d: prefix translation %q, want %q", i, got, tc.want)
		}
	}
}
