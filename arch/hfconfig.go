package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// LoadModel reads a Hugging Face config.json. A directory is read as its
// config.json.
func LoadModel(path string) (*Model, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = strings.TrimSuffix(path, "/") + "/config.json"
	}
	data, err := ReadConfigFile(path)
	if err != nil {
		return nil, err
	}
	return ParseModel(data, path)
}

// maxConfigBytes bounds the configuration files eppsim reads (config.json,
// catalogues, presets): real ones are a few kilobytes.
const maxConfigBytes = 16 << 20

// ReadConfigFile reads a configuration file: a regular file of at most
// 16 MiB (not a device or a pipe that never ends).
func ReadConfigFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() > maxConfigBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than a configuration file's %d", path, st.Size(), maxConfigBytes)
	}
	return os.ReadFile(path)
}

// ParseModel decodes a Hugging Face config.json. Unknown keys are ignored
// (real configs carry dozens that do not shape the network); the keys it
// reads are checked for type and range, and errors name the file and the
// field ("config.json: num_attention_heads: must be > 0"). name is the file
// name used in errors and the model's Name.
func ParseModel(data []byte, name string) (*Model, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark is no JSON
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: %w", name, jsonSyntax(data, err))
	}
	if top == nil {
		return nil, fmt.Errorf("%s: not a JSON object", name)
	}
	root := &fields{file: name, m: top}
	f := root
	// Multimodal wrappers (Llama-4, Mistral-3, Gemma-3) nest the language
	// model in text_config; keys it lacks fall back to the top level.
	if raw, ok := top["text_config"]; ok && !isNull(raw) {
		var tc map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tc); err != nil || tc == nil {
			return nil, fmt.Errorf("%s: text_config: want an object", name)
		}
		f = &fields{file: name, prefix: "text_config.", m: tc, parent: root}
	}
	m := &Model{Name: name}
	if err := m.parse(f, root); err != nil {
		return nil, err
	}
	if n := m.roughParams(); n > maxParams {
		return nil, fmt.Errorf("%s: implausibly large: %.3g parameters (the limit is %.0g)", name, n, float64(maxParams))
	}
	return m, nil
}

// maxLayers bounds num_hidden_layers (the deepest published models have
// a few hundred).
const maxLayers = 1 << 16

// maxParams bounds a model's size so that every count fits an int64 with
// room to spare (the largest published models have ~2·10¹²).
const maxParams = 1e15

// roughParams is Params().Total() in float64, which cannot overflow.
func (m *Model) roughParams() float64 {
	L, d, h := float64(m.Layers), float64(m.Hidden), float64(m.Heads)
	n := L*(2*d*h*float64(m.HeadDim)+2*d*float64(m.KVHeads)*float64(m.HeadDim)+4*d) +
		float64(m.DenseLayers)*3*d*float64(m.Intermediate) + 2*float64(m.Vocab)*d + float64(m.VisionParams)
	if a := m.MLA; a != nil {
		r := float64(a.QLoraRank + a.KVLoraRank + a.QKNopeHeadDim + a.QKRopeHeadDim + a.VHeadDim)
		n += L * (d*r + r*h*r + h*r*d)
	}
	if e := m.MoE; e != nil {
		n += float64(e.Layers) * (3*d*(float64(e.Experts)*float64(e.ExpertIntermediate)+
			float64(e.SharedExperts)*float64(e.SharedIntermediate)) + 2*d*float64(e.Experts))
	}
	return n
}

func (m *Model) parse(f, root *fields) error {
	var err error
	if m.Type, _, err = f.str("model_type"); err != nil {
		return err
	}
	if m.Layers, err = f.positive("num_hidden_layers"); err != nil {
		return err
	}
	if m.Layers > maxLayers {
		return f.errf("num_hidden_layers", "must be at most %d, got %d", maxLayers, m.Layers)
	}
	if m.Hidden, err = f.positive("hidden_size"); err != nil {
		return err
	}
	if m.Heads, err = f.positive("num_attention_heads"); err != nil {
		return err
	}
	if m.Vocab, err = f.positive("vocab_size"); err != nil {
		return err
	}
	kv, ok, err := f.int("num_key_value_heads")
	switch {
	case err != nil:
		return err
	case !ok:
		m.KVHeads = m.Heads // multi-head attention
	case kv <= 0:
		return f.errf("num_key_value_heads", "must be > 0, got %d", kv)
	case m.Heads%kv != 0:
		return f.errf("num_key_value_heads", "%d does not divide num_attention_heads %d", kv, m.Heads)
	default:
		m.KVHeads = kv
	}
	hd, ok, err := f.int("head_dim")
	switch {
	case err != nil:
		return err
	case ok && hd <= 0:
		return f.errf("head_dim", "must be > 0, got %d", hd)
	case ok:
		m.HeadDim = hd
	case m.Hidden%m.Heads != 0:
		return f.errf("head_dim", "required: hidden_size %d is not a multiple of num_attention_heads %d", m.Hidden, m.Heads)
	default:
		m.HeadDim = m.Hidden / m.Heads
	}
	if m.MaxPositionEmbeddings, _, err = f.nonNegative("max_position_embeddings"); err != nil {
		return err
	}
	if err := m.parseDtype(f); err != nil {
		return err
	}
	known := knownFamily(m.Type)
	tied, ok, err := f.bool("tie_word_embeddings")
	if err != nil {
		return err
	}
	// transformers' PretrainedConfig ties by default; the Llama, Mistral,
	// Qwen and DeepSeek config classes do not.
	m.TiedEmbeddings = tied || (!ok && !known)
	attnBias, _, err := f.bool("attention_bias")
	if err != nil {
		return err
	}
	m.QKVBias = attnBias || strings.HasPrefix(m.Type, "qwen2")
	m.OutputBias = attnBias
	if m.MLPBias, _, err = f.bool("mlp_bias"); err != nil {
		return err
	}
	m.QKNorm = strings.HasPrefix(m.Type, "qwen3")
	if err := m.parseMLA(f); err != nil {
		return err
	}
	if err := m.parseSlidingWindow(f); err != nil {
		return err
	}
	if err := m.parseMLP(f); err != nil {
		return err
	}
	if err := m.parseQuant(root); err != nil {
		return err
	}
	return m.parseVision(root)
}

// parseSlidingWindow reads which layers attend to a sliding window of
// sliding_window tokens, as transformers lays them out:
//   - layer_types (gpt-oss, newer Gemma and Qwen configs): the layers
//     marked "sliding_attention";
//   - otherwise use_sliding_window false (Qwen2/Qwen3): none;
//   - sliding_window_pattern N (Gemma-3): all but every N-th layer;
//   - model_type gemma2: every other layer, the first included;
//   - use_sliding_window true (Qwen2): the layers from max_window_layers on;
//   - a sliding_window alone (Mistral-7B-v0.1): every layer.
func (m *Model) parseSlidingWindow(f *fields) error {
	w, hasW, err := f.nonNegative("sliding_window")
	if err != nil {
		return err
	}
	var types []string
	if err := f.appendStrings("layer_types", &types); err != nil {
		return err
	}
	use, hasUse, err := f.bool("use_sliding_window")
	if err != nil {
		return err
	}
	n := 0
	switch {
	case types != nil:
		if len(types) != m.Layers {
			return f.errf("layer_types", "%d entries for %d layers", len(types), m.Layers)
		}
		for _, t := range types {
			if t == "sliding_attention" {
				n++
			}
		}
	case !hasW || w == 0 || (hasUse && !use):
	default:
		pattern, hasPattern, err := f.int("sliding_window_pattern")
		switch {
		case err != nil:
			return err
		case hasPattern && pattern <= 0:
			return f.errf("sliding_window_pattern", "must be > 0, got %d", pattern)
		case hasPattern:
			n = m.Layers - m.Layers/pattern
		case m.Type == "gemma2":
			n = (m.Layers + 1) / 2
		case hasUse && use:
			first, ok, err := f.nonNegative("max_window_layers")
			if err != nil {
				return err
			}
			if !ok {
				first = 0
			}
			n = max(0, m.Layers-first)
		default:
			n = m.Layers
		}
	}
	if n > 0 && (!hasW || w == 0) {
		return f.errf("sliding_window", "required: %d layers are sliding_attention", n)
	}
	if n > 0 {
		m.SlidingWindow, m.SlidingLayers = w, n
	}
	return nil
}

// knownFamily reports model types whose config classes default
// tie_word_embeddings to false.
func knownFamily(t string) bool {
	for _, p := range []string{"llama", "mistral", "mixtral", "qwen2", "qwen3", "deepseek", "yi"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func (m *Model) parseDtype(f *fields) error {
	key := "torch_dtype"
	s, ok, err := f.str(key)
	if err != nil {
		return err
	}
	if !ok { // transformers ≥ 4.56 writes "dtype"
		key = "dtype"
		if s, ok, err = f.str(key); err != nil {
			return err
		}
	}
	if !ok {
		m.Dtype = BF16
		return nil
	}
	d, err := ParseDtype(s)
	if err != nil {
		return f.errf(key, "%v", err)
	}
	m.Dtype = d
	return nil
}

func (m *Model) parseMLA(f *fields) error {
	kvr, ok, err := f.int("kv_lora_rank")
	if err != nil || !ok {
		return err
	}
	if kvr <= 0 {
		return f.errf("kv_lora_rank", "must be > 0, got %d", kvr)
	}
	a := &MLA{KVLoraRank: kvr}
	if a.QLoraRank, _, err = f.nonNegative("q_lora_rank"); err != nil {
		return err
	}
	if a.QKNopeHeadDim, err = f.positive("qk_nope_head_dim"); err != nil {
		return err
	}
	if a.QKRopeHeadDim, err = f.positive("qk_rope_head_dim"); err != nil {
		return err
	}
	if a.VHeadDim, err = f.positive("v_head_dim"); err != nil {
		return err
	}
	m.MLA = a
	return nil
}

// parseMLP reads the feed-forward layout: dense, or a mixture of experts in
// one of three config dialects.
func (m *Model) parseMLP(f *fields) error {
	inter, hasInter, err := f.int("intermediate_size")
	if err != nil {
		return err
	}
	if hasInter && inter <= 0 {
		return f.errf("intermediate_size", "must be > 0, got %d", inter)
	}
	var key string
	var experts int
	for _, k := range []string{"n_routed_experts", "num_experts", "num_local_experts"} {
		n, ok, err := f.int(k)
		if err != nil {
			return err
		}
		if ok && n < 0 {
			return f.errf(k, "must not be negative, got %d", n)
		}
		if ok && n > 0 {
			key, experts = k, n
			break
		}
	}
	if experts == 0 {
		if !hasInter {
			return f.errf("intermediate_size", "required")
		}
		m.Intermediate, m.DenseLayers = inter, m.Layers
		return nil
	}
	moe := &MoE{Experts: experts}
	if moe.ExpertsPerToken, err = f.positive("num_experts_per_tok"); err != nil {
		return err
	}
	if moe.ExpertsPerToken > experts {
		return f.errf("num_experts_per_tok", "%d exceeds %s %d", moe.ExpertsPerToken, key, experts)
	}
	isMoE := make([]bool, m.Layers)
	switch {
	case key == "n_routed_experts": // DeepSeek-V2/V3
		if moe.ExpertIntermediate, err = f.positive("moe_intermediate_size"); err != nil {
			return err
		}
		if moe.SharedExperts, _, err = f.nonNegative("n_shared_experts"); err != nil {
			return err
		}
		moe.SharedIntermediate = moe.ExpertIntermediate
		first, _, err := f.nonNegative("first_k_dense_replace")
		if err != nil {
			return err
		}
		freq, ok, err := f.int("moe_layer_freq")
		if err != nil {
			return err
		}
		if !ok {
			freq = 1
		} else if freq <= 0 {
			return f.errf("moe_layer_freq", "must be > 0, got %d", freq)
		}
		for i := range isMoE {
			isMoE[i] = i >= first && i%freq == 0
		}
	case key == "num_experts": // Qwen2-MoE, Qwen3-MoE
		if moe.ExpertIntermediate, err = f.positive("moe_intermediate_size"); err != nil {
			return err
		}
		shared, _, err := f.nonNegative("shared_expert_intermediate_size")
		if err != nil {
			return err
		}
		if shared > 0 {
			moe.SharedExperts, moe.SharedIntermediate, moe.SharedGate = 1, shared, true
		}
		step, ok, err := f.int("decoder_sparse_step")
		if err != nil {
			return err
		}
		if !ok {
			step = 1
		} else if step <= 0 {
			return f.errf("decoder_sparse_step", "must be > 0, got %d", step)
		}
		only, _, err := f.intList("mlp_only_layers")
		if err != nil {
			return err
		}
		for i := range isMoE {
			isMoE[i] = (i+1)%step == 0 && !slices.Contains(only, i)
		}
	case strings.HasPrefix(m.Type, "llama4"): // Llama-4: routed + one shared expert, interleaved
		if !hasInter {
			return f.errf("intermediate_size", "required")
		}
		moe.ExpertIntermediate, moe.SharedExperts, moe.SharedIntermediate = inter, 1, inter
		dense, ok, err := f.int("intermediate_size_mlp")
		if err != nil {
			return err
		}
		if ok && dense <= 0 {
			return f.errf("intermediate_size_mlp", "must be > 0, got %d", dense)
		}
		inter, hasInter = dense, ok
		layers, ok, err := f.intList("moe_layers")
		if err != nil {
			return err
		}
		if ok {
			for _, l := range layers {
				if l < 0 || l >= m.Layers {
					return f.errf("moe_layers", "layer %d out of range 0..%d", l, m.Layers-1)
				}
				isMoE[l] = true
			}
			break
		}
		step, ok, err := f.int("interleave_moe_layer_step")
		if err != nil {
			return err
		}
		if !ok {
			step = 1
		} else if step <= 0 {
			return f.errf("interleave_moe_layer_step", "must be > 0, got %d", step)
		}
		for i := range isMoE {
			isMoE[i] = (i+1)%step == 0
		}
	default: // Mixtral: every layer routes, experts are intermediate_size wide
		if !hasInter {
			return f.errf("intermediate_size", "required")
		}
		moe.ExpertIntermediate = inter
		for i := range isMoE {
			isMoE[i] = true
		}
	}
	for _, b := range isMoE {
		if b {
			moe.Layers++
		}
	}
	m.DenseLayers = m.Layers - moe.Layers
	if m.DenseLayers > 0 {
		if !hasInter {
			return f.errf("intermediate_size", "required: %d layers are dense", m.DenseLayers)
		}
		m.Intermediate = inter
	}
	if moe.Layers > 0 {
		m.MoE = moe
	}
	return nil
}

// parseQuant reads quantization_config (compression_config in older
// compressed-tensors checkpoints).
func (m *Model) parseQuant(root *fields) error {
	key := "quantization_config"
	raw, ok := root.m[key]
	if !ok || isNull(raw) {
		key = "compression_config"
		if raw, ok = root.m[key]; !ok || isNull(raw) {
			return nil
		}
	}
	var qm map[string]json.RawMessage
	if err := json.Unmarshal(raw, &qm); err != nil || qm == nil {
		return root.errf(key, "want an object")
	}
	q := &fields{file: root.file, prefix: key + ".", m: qm}
	method, ok, err := q.str("quant_method")
	if err != nil {
		return err
	}
	if !ok {
		return q.errf("quant_method", "required")
	}
	m.Quant.Method = method
	switch method {
	case "fp8", "fbgemm_fp8":
		m.Quant.WeightBits, m.Quant.Float = 8, true
		for _, k := range []string{"ignored_layers", "modules_to_not_convert"} {
			if err := q.appendStrings(k, &m.Quant.Ignore); err != nil {
				return err
			}
		}
	case "compressed-tensors":
		if err := m.parseCompressedTensors(q); err != nil {
			return err
		}
	case "awq", "gptq":
		bits, err := q.positive("bits")
		if err != nil {
			return err
		}
		if bits > 16 {
			return q.errf("bits", "must be at most 16, got %d", bits)
		}
		m.Quant.WeightBits = bits
		if err := q.appendStrings("modules_to_not_convert", &m.Quant.Ignore); err != nil {
			return err
		}
	case "mxfp4":
		// vLLM quantises the routed experts alone (Quantization.ExpertsOnly)
		// and, on Hopper, computes in BF16 (its Triton and FlashInfer SM90
		// MXFP4 paths are w4a16), so the linear layers' peak is BF16's.
		m.Quant.setMXFP4()
		if err := q.appendStrings("modules_to_not_convert", &m.Quant.Ignore); err != nil {
			return err
		}
	default:
		return q.errf("quant_method", "unsupported %q (supported: fp8, compressed-tensors, awq, gptq, mxfp4)", method)
	}
	m.Quant.KeepAttention = m.Quant.ExpertsOnly || m.Quant.ignores("self_attn")
	return nil
}

// parseCompressedTensors takes the weight format of the config group that
// targets Linear layers (all groups must agree on the bit width).
func (m *Model) parseCompressedTensors(q *fields) error {
	if err := q.appendStrings("ignore", &m.Quant.Ignore); err != nil {
		return err
	}
	raw, ok := q.m["config_groups"]
	if !ok || isNull(raw) {
		return q.errf("config_groups", "required")
	}
	var groups map[string]struct {
		Weights *struct {
			NumBits int    `json:"num_bits"`
			Type    string `json:"type"`
		} `json:"weights"`
	}
	if err := json.Unmarshal(raw, &groups); err != nil {
		return q.errf("config_groups", "%v", err)
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w := groups[n].Weights
		if w == nil {
			continue
		}
		if w.NumBits <= 0 || w.NumBits > 16 {
			return q.errf("config_groups."+n+".weights.num_bits", "must be in 1..16, got %d", w.NumBits)
		}
		if m.Quant.WeightBits != 0 && m.Quant.WeightBits != w.NumBits {
			return q.errf("config_groups."+n+".weights.num_bits", "%d differs from another group's %d (mixed widths are not modelled)", w.NumBits, m.Quant.WeightBits)
		}
		m.Quant.WeightBits, m.Quant.Float = w.NumBits, w.Type == "float"
	}
	if m.Quant.WeightBits == 0 {
		return q.errf("config_groups", "no group quantises weights")
	}
	return nil
}

// parseVision estimates a multimodal encoder's size from vision_config: a
// ViT of num_hidden_layers blocks, each with 4·h² attention and 2·h·ff MLP
// parameters. vLLM loads it even for text-only traffic, so it takes memory.
func (m *Model) parseVision(root *fields) error {
	raw, ok := root.m["vision_config"]
	if !ok || isNull(raw) {
		return nil
	}
	var vm map[string]json.RawMessage
	if err := json.Unmarshal(raw, &vm); err != nil || vm == nil {
		return root.errf("vision_config", "want an object")
	}
	v := &fields{file: root.file, prefix: "vision_config.", m: vm}
	var dims [3]int64
	for i, k := range []string{"hidden_size", "intermediate_size", "num_hidden_layers"} {
		n, ok, err := v.nonNegative(k)
		if err != nil {
			return err
		}
		if !ok {
			return nil // another encoder layout: not estimated
		}
		dims[i] = int64(n)
	}
	hs, ff, layers := float64(dims[0]), float64(dims[1]), float64(dims[2])
	n := layers * (4*hs*hs + 2*hs*ff)
	if n > maxParams {
		return root.errf("vision_config", "implausibly large: %.3g parameters", n)
	}
	m.VisionParams = int64(n)
	return nil
}

// ignores reports whether the quantisation ignore list names a module
// whose path contains part (entries are module names or "re:" patterns).
func (q *Quantization) ignores(part string) bool {
	probe := "model.layers.0." + part + ".q_proj"
	for _, e := range q.Ignore {
		if pat, ok := strings.CutPrefix(e, "re:"); ok {
			if re, err := regexp.Compile(pat); err == nil && re.MatchString(probe) {
				return true
			}
			continue
		}
		if strings.Contains(e, part) {
			return true
		}
	}
	return false
}

// fields reads typed values from one JSON object of a config.
type fields struct {
	file, prefix string
	m            map[string]json.RawMessage
	parent       *fields // for text_config: the top level
}

func (f *fields) errf(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s%s: %s", f.file, f.prefix, key, fmt.Sprintf(format, args...))
}

// lookup finds key here or, for text_config, at the top level.
func (f *fields) lookup(key string) (json.RawMessage, *fields, bool) {
	if raw, ok := f.m[key]; ok && !isNull(raw) {
		return raw, f, true
	}
	if f.parent != nil {
		return f.parent.lookup(key)
	}
	return nil, f, false
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func kind(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return "nothing"
	}
	switch s[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func (f *fields) int(key string) (int, bool, error) {
	raw, at, ok := f.lookup(key)
	if !ok {
		return 0, false, nil
	}
	n, err := parseInt(raw)
	if err != nil {
		return 0, true, at.errf(key, "%v", err)
	}
	return n, true, nil
}

func parseInt(raw json.RawMessage) (int, error) {
	s := string(bytes.TrimSpace(raw))
	if kind(raw) != "a number" {
		return 0, fmt.Errorf("want an integer, got %s", kind(raw))
	}
	if n, err := strconv.ParseInt(s, 10, 32); err == nil {
		return int(n), nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
		return 0, fmt.Errorf("want an integer below 2^31, got %s", s)
	}
	return int(x), nil
}

func (f *fields) positive(key string) (int, error) {
	n, ok, err := f.int(key)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, f.errf(key, "required")
	case n <= 0:
		_, at, _ := f.lookup(key)
		return 0, at.errf(key, "must be > 0, got %d", n)
	}
	return n, nil
}

func (f *fields) nonNegative(key string) (int, bool, error) {
	n, ok, err := f.int(key)
	if err == nil && n < 0 {
		_, at, _ := f.lookup(key)
		err = at.errf(key, "must not be negative, got %d", n)
	}
	return n, ok, err
}

func (f *fields) bool(key string) (bool, bool, error) {
	raw, at, ok := f.lookup(key)
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, true, at.errf(key, "want true or false, got %s", kind(raw))
	}
	return b, true, nil
}

func (f *fields) str(key string) (string, bool, error) {
	raw, at, ok := f.lookup(key)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, at.errf(key, "want a string, got %s", kind(raw))
	}
	return s, true, nil
}

func (f *fields) intList(key string) ([]int, bool, error) {
	raw, at, ok := f.lookup(key)
	if !ok {
		return nil, false, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, true, at.errf(key, "want a list of integers, got %s", kind(raw))
	}
	out := make([]int, len(items))
	for i, it := range items {
		n, err := parseInt(it)
		if err != nil {
			return nil, true, at.errf(fmt.Sprintf("%s[%d]", key, i), "%v", err)
		}
		out[i] = n
	}
	return out, true, nil
}

func (f *fields) appendStrings(key string, dst *[]string) error {
	raw, at, ok := f.lookup(key)
	if !ok {
		return nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return at.errf(key, "want a list of strings, got %s", kind(raw))
	}
	*dst = append(*dst, ss...)
	return nil
}

// jsonSyntax adds the line and column to a JSON syntax error.
func jsonSyntax(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err
	}
	line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
	col := int(se.Offset) - bytes.LastIndexByte(data[:min(int(se.Offset), len(data))], '\n') - 1
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
