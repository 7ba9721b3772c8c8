package workload

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// synthReader generates multi-turn chat traffic from a Spec.
//
// Sessions start as a Poisson or gamma process. Each picks a tenant (whose
// system prompt it shares with the tenant's other sessions), a number of
// turns, and per turn a user message (optionally led by a shared RAG
// document), an answer and the think time before the next turn. The prompt
// of turn k is the whole conversation so far, so context grows and every
// answer is a cache hit for the next turn. All randomness comes from the
// *rand.Rand handed in: it draws the arrivals, one seed per session and the
// tenants' and documents' seeds, so output depends only on it, not on the
// interleaving of sessions.
type synthReader struct {
	spec   *Spec
	opt    *Options
	enc    *chatEncoder
	lex    *Lexicon
	rng    *rand.Rand
	gaps   interarrival
	closed bool

	tenantPrompts []string
	tenantSalts   []string
	tenantDist    discrete
	docSeed       uint64
	docs          map[int]string
	docDist       discrete
	think         LogNormal
	user          LogNormal
	answer        LogNormal

	started   int
	nextStart int64
	nextID    int64
	pending   minHeap[*synthSession]
}

type synthSession struct {
	id         string
	seq        int64
	tenant     int
	turns      int
	k          int
	next       int64
	think      int64 // think time before turn k
	prevID     int64
	rng        *rand.Rand
	msgs       []Message
	conv       conv
	lastAnswer string
}

// NewSynthesizer returns a Stream of synthesized traffic. Options.Rate, if
// set, overrides the spec's session rate and Options.Model its model;
// Options.Mode chooses closed-loop (default) or open-loop replay.
func NewSynthesizer(spec *Spec, rng *rand.Rand, opt Options) (*Stream, error) {
	userModel := opt.Model
	o, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	name := "synth"
	if spec.Name != "" {
		name = "synth:" + spec.Name
	}
	return newSynthStream(name, spec, rng, o, userModel)
}

func newSynthStream(name string, spec *Spec, rng *rand.Rand, o Options, userModel string) (*Stream, error) {
	sp := *spec
	if err := sp.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if userModel != "" {
		sp.Model = userModel
	}
	if o.Rate > 0 {
		sp.Arrivals.Rate = o.Rate
	}
	o.Model = sp.Model
	if o.Mode == ModeDefault {
		o.Mode = ModeClosedLoop
	}
	api, err := rewriteAPI(FormatSynth, o.API)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r, err := newSynthReader(&sp, rng, &o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Stream{name: name, format: FormatSynth, mode: o.Mode, rd: r, scale: o.TimeScale, classes: newClassAssigner(o), api: api}, nil
}

func newSynthReader(sp *Spec, rng *rand.Rand, o *Options) (*synthReader, error) {
	enc, err := newChatEncoder(o.Tokenizer, defaultSegCacheBytes)
	if err != nil {
		return nil, err
	}
	lex, err := o.Tokenizer.Lexicon(sp.BytesPerToken)
	if err != nil {
		return nil, err
	}
	s := &synthReader{
		spec: sp, opt: o, enc: enc, lex: lex, rng: rng,
		gaps:   interarrival{mean: 1e9 / sp.Arrivals.Rate, cv: sp.Arrivals.CV},
		closed: o.Mode == ModeClosedLoop,
		think:  sp.Think.dist(), user: sp.User.dist(), answer: sp.Answer.dist(),
		docs: make(map[int]string),
	}
	if sp.Arrivals.Process == "poisson" {
		s.gaps.cv = 1
	}
	s.pending.less = func(a, b *synthSession) bool {
		if a.next != b.next {
			return a.next < b.next
		}
		return a.seq < b.seq
	}
	// Tenants: system prompts and salts, fixed by the generator's seed.
	s.tenantDist = newDiscrete(zipfWeights(sp.Tenants.Count, sp.Tenants.Zipf))
	sysDist := sp.Tenants.SystemPrompt.dist()
	for i := range sp.Tenants.Count {
		prompt := ""
		if sp.Tenants.SystemPrompt.Median > 0 {
			tr := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
			prompt = s.text(tr, int(math.Round(sysDist.Sample(tr))), false)
		}
		s.tenantPrompts = append(s.tenantPrompts, prompt)
		salt := ""
		if sp.Tenants.CacheSalt {
			salt = "tenant-" + strconv.Itoa(i)
		}
		s.tenantSalts = append(s.tenantSalts, salt)
	}
	if sp.RAG.Probability > 0 {
		s.docSeed = rng.Uint64()
		s.docDist = newDiscrete(zipfWeights(sp.RAG.Documents, sp.RAG.Zipf))
	}
	return s, nil
}

// text generates about n tokens of sentences from lexicon words.
func (s *synthReader) text(r *rand.Rand, n int, question bool) string {
	var b strings.Builder
	b.Grow(int(float64(n) * (s.lex.bytesPerToken + 1)))
	count := 0
	for count < n {
		words := 5 + r.IntN(16)
		for i := 0; i < words && count < n; i++ {
			w, _ := s.lex.Word(r.Uint64())
			switch {
			case i == 0 && (b.Len() == 0 || strings.HasSuffix(b.String(), "\n")):
				b.WriteByte(w[1] - 'a' + 'A')
				b.WriteString(w[2:])
			case i == 0:
				b.WriteByte(' ')
				b.WriteByte(w[1] - 'a' + 'A')
				b.WriteString(w[2:])
			default:
				b.WriteString(w)
			}
			count++
		}
		end := "."
		if question && count >= n {
			end = "?"
		}
		b.WriteString(end)
		count++
		if count < n && r.IntN(6) == 0 {
			b.WriteString("\n\n")
			count++
		}
	}
	return b.String()
}

func (s *synthReader) doc(i int) string {
	if d, ok := s.docs[i]; ok {
		return d
	}
	r := rand.New(rand.NewPCG(s.docSeed, uint64(i)))
	d := s.text(r, int(math.Round(s.spec.RAG.Document.dist().Sample(r))), false) + "\n\n"
	s.docs[i] = d
	return d
}

func (s *synthReader) next() (*Request, error) {
	for {
		if s.pending.len() == 0 || s.pending.peek().next > s.nextStart {
			if s.started < s.spec.Sessions {
				s.startSession()
				continue
			}
			if s.pending.len() == 0 {
				return nil, io.EOF
			}
		}
		if req, err := s.emit(s.pending.pop()); req != nil || err != nil {
			return req, err
		}
	}
}

func (s *synthReader) startSession() {
	r := rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
	turns := 1
	if s.spec.Turns.Mean > 1 {
		// 1 + geometric with mean Mean - 1.
		p := 1 / s.spec.Turns.Mean
		u := 1 - r.Float64()
		turns = 1 + int(math.Floor(math.Log(u)/math.Log(1-p)))
	}
	turns = min(turns, s.spec.Turns.Max)
	sess := &synthSession{
		id: "s" + strconv.Itoa(s.started), seq: int64(s.started), tenant: s.tenantDist.sample(r),
		turns: turns, next: s.nextStart, prevID: -1, rng: r,
	}
	s.started++
	s.nextStart += int64(s.gaps.next(s.rng))
	s.pending.push(sess)
}

// emit builds turn k of the session; nil if the session has ended because
// its context outgrew MaxContextTokens.
func (s *synthReader) emit(sess *synthSession) (*Request, error) {
	r := sess.rng
	var add []Message
	if sess.k == 0 {
		if p := s.tenantPrompts[sess.tenant]; p != "" {
			add = append(add, Message{Role: "system", Content: []string{p}})
		}
	} else {
		add = append(add, Message{Role: "assistant", Content: []string{sess.lastAnswer}})
	}
	role := "user"
	if sess.k > 0 {
		role = s.spec.FollowUpRole
	}
	var content []string
	if s.spec.RAG.Probability > 0 && role == "user" && r.Float64() < s.spec.RAG.Probability {
		content = append(content, s.doc(s.docDist.sample(r)))
	}
	content = append(content, s.text(r, int(math.Round(s.user.Sample(r))), role == "user"))
	add = append(add, Message{Role: role, Content: content})
	for _, m := range add {
		if err := sess.conv.add(s.enc, m); err != nil {
			return nil, &fatalError{err}
		}
		sess.msgs = append(sess.msgs, m)
	}
	prompt, err := sess.conv.prompt(s.enc)
	if err != nil {
		return nil, &fatalError{err}
	}
	if len(prompt) > s.spec.MaxContextTokens {
		return nil, nil // the user starts over elsewhere; this session ends
	}
	answer := s.text(r, int(math.Round(s.answer.Sample(r))), false)
	out, err := s.enc.answer(answer)
	if err != nil {
		return nil, &fatalError{err}
	}
	salt := s.tenantSalts[sess.tenant]
	req := &Request{
		ID: s.nextID, Session: sess.id, Turn: sess.k, Prev: sess.prevID, Arrival: sess.next,
		Model: s.spec.Model, Body: chatBody(s.spec.Model, sess.msgs, len(out), salt),
		Endpoint: EndpointChat, PromptTokens: prompt, PromptLen: len(prompt),
		OutputTokens: len(out), OutputTokenIDs: out, OutputText: answer, CacheSalt: salt,
	}
	if sess.k > 0 && s.closed {
		req.AfterPrevious, req.ThinkTime = true, sess.think
	}
	s.nextID++
	sess.prevID = req.ID
	sess.lastAnswer = answer
	sess.k++
	if sess.k < sess.turns {
		sess.think = int64(s.think.Sample(r))
		sess.next += sess.think
		s.pending.push(sess)
	}
	return req, nil
}
