package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

// eppHashOutput is what `eppsim epp hash` prints.
type eppHashOutput struct {
	BlockSize    int        `json:"block_size"`
	PseudoTokens []int      `json:"pseudo_tokens"`
	Prompts      [][]string `json:"prompts"`
}

// hashMaxPrefixTokens is the approx producer's default maxPrefixTokensToMatch;
// the hash command caps each prompt at hashMaxPrefixTokens/N blocks, as the
// golden vectors do.
const hashMaxPrefixTokens = 131072

// newEPPHashCmd is `eppsim epp hash`: the approximate prefix producer's block
// hashes of one request body (spec §5.2–5.3).
func newEPPHashCmd() *cobra.Command {
	var (
		model     string
		blockSize int
		request   string
	)
	cmd := &cobra.Command{
		Use:   "hash --model MODEL [--block-size N] [--request FILE]",
		Short: "Print the approximate prefix block hashes of an OpenAI request body",
		Long: "Read an OpenAI request body (chat completions if it has \"messages\", completions if it\n" +
			"has \"prompt\"; cache_salt honoured) from FILE, or from stdin when FILE is \"-\" or not\n" +
			"given. Run the token-producer's estimate backend and hash the pseudo-tokens exactly as\n" +
			"the approx-prefix-cache-producer does (xxhash64 seeded by MODEL and the cache salt,\n" +
			"chained, partial last block kept), at block size N tokens — N is used as given, not\n" +
			"clamped to the producer's minimum of 64 — and at most 131072/N blocks per prompt.\n\n" +
			"Prints JSON {\"block_size\": N, \"pseudo_tokens\": [tokens per prompt], \"prompts\":\n" +
			"[[\"<decimal uint64>\", ...], ...]}: pseudo_tokens has one count per prompt of the body\n" +
			"(a completions array of strings has several); prompts has one hash chain per prompt\n" +
			"that has tokens (empty prompts yield none, as upstream's GetBlockHashes).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every failure is the input's: exit 2, naming the flag or
			// the request file.
			if model == "" {
				return withExitCode(2, errors.New("--model is required"))
			}
			if blockSize <= 0 {
				return withExitCode(2, fmt.Errorf("--block-size %d: must be > 0", blockSize))
			}
			body, err := readRequestBody(request, cmd.InOrStdin())
			if err != nil {
				return withExitCode(2, err)
			}
			out, err := eppHash(model, blockSize, body)
			if err != nil {
				name := request
				if name == "" || name == "-" {
					name = "stdin"
				}
				return withExitCode(2, fmt.Errorf("--request %s: %w", name, err))
			}
			b, err := json.Marshal(out)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "model name the hashes are seeded with (the request's target model)")
	cmd.Flags().IntVar(&blockSize, "block-size", 64, "block size in pseudo-tokens (4 bytes each); not clamped")
	cmd.Flags().StringVar(&request, "request", "-", `request body file ("-" = stdin)`)
	return cmd
}

func readRequestBody(path string, stdin io.Reader) ([]byte, error) {
	if path == "" || path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("--request: reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--request: %w", err)
	}
	return b, nil
}

// eppHash tokenizes body with the estimate backend and hashes it.
func eppHash(model string, blockSize int, body []byte) (*eppHashOutput, error) {
	if !json.Valid(body) {
		return nil, errors.New("request body is not valid JSON")
	}
	kind := prefixhash.KindOf("", body)
	switch kind {
	case prefixhash.KindChatCompletions, prefixhash.KindCompletions:
	default:
		return nil, errors.New(`request body: neither "messages" (chat completions) nor "prompt" (completions) in a JSON object`)
	}
	if err := prefixhash.CheckBody(kind, body); err != nil {
		return nil, fmt.Errorf("the EPP rejects this body with HTTP 400 (spec §2.1 step 0): %w", err)
	}
	tr, err := (&prefixhash.Estimator{}).Tokenize("", body)
	if err != nil {
		return nil, err
	}
	out := &eppHashOutput{BlockSize: blockSize, PseudoTokens: []int{}, Prompts: [][]string{}}
	if tr == nil {
		return out, nil
	}
	for _, p := range tr.Prompts {
		out.PseudoTokens = append(out.PseudoTokens, len(p))
	}
	req := &epp.Request{TargetModel: model, Tokenized: tr}
	for _, hs := range prefixhash.GetBlockHashes(req, blockSize, hashMaxPrefixTokens/blockSize) {
		list := make([]string, len(hs))
		for i, h := range hs {
			list[i] = strconv.FormatUint(h, 10)
		}
		out.Prompts = append(out.Prompts, list)
	}
	return out, nil
}
