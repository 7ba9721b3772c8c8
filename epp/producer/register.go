package producer

import "github.com/eppsim/eppsim/epp"

// Register adds this package's plugin types to r: token-producer (and its
// legacy alias tokenizer), approx-prefix-cache-producer,
// precise-prefix-cache-producer, precise-prefix-cache-scorer (deprecated),
// inflight-load-producer, session-id-producer, burst-prefix-cache-producer
// mm-embeddings-cache-producer, dcgm-data-source and dcgm-extractor, and
// llm-d-v0.2-prefix-cache-scorer (eppsim's model of the v0.2.x scorer).
func Register(r *epp.Registry) {
	r.Register(TokenProducerType, tokenFactory(TokenProducerType))
	r.Register(LegacyTokenizerType, tokenFactory(LegacyTokenizerType))
	r.Register(ApproxPrefixType, approxFactory)
	r.Register(PrecisePrefixType, preciseFactory)
	r.Register(PrecisePrefixScorerType, preciseScorerFactory)
	r.Register(InFlightLoadType, inflightFactory)
	r.Register(SessionIDType, sessionFactory)
	r.Register(BurstPrefixType, burstFactory)
	r.Register(MMEmbeddingsType, mmEmbeddingsFactory)
	r.Register(V02PrefixCacheScorerType, v02Factory)
	RegisterDCGM(r)
}

// RegisterDCGM adds dcgm-data-source and dcgm-extractor to r.
func RegisterDCGM(r *epp.Registry) {
	r.Register(DCGMSourceType, dcgmSourceFactory)
	r.Register(DCGMExtractorType, dcgmExtractorFactory)
}

// Compile-time interface checks.
var (
	_ epp.DataProducer          = (*TokenProducer)(nil)
	_ epp.DataProducer          = (*ApproxPrefix)(nil)
	_ epp.DataConsumer          = (*ApproxPrefix)(nil)
	_ epp.PreRequestHook        = (*ApproxPrefix)(nil)
	_ epp.DataProducer          = (*PrecisePrefix)(nil)
	_ epp.DataConsumer          = (*PrecisePrefix)(nil)
	_ epp.PreRequestHook        = (*PrecisePrefix)(nil)
	_ epp.KVEventConsumer       = (*PrecisePrefix)(nil)
	_ epp.Scorer                = (*PrecisePrefixScorer)(nil)
	_ epp.DataProducer          = (*PrecisePrefixScorer)(nil)
	_ epp.DataConsumer          = (*PrecisePrefixScorer)(nil)
	_ epp.PreRequestHook        = (*PrecisePrefixScorer)(nil)
	_ epp.KVEventConsumer       = (*PrecisePrefixScorer)(nil)
	_ epp.DataProducer          = (*InFlightLoad)(nil)
	_ epp.DataConsumer          = (*InFlightLoad)(nil)
	_ epp.PreRequestHook        = (*InFlightLoad)(nil)
	_ epp.ResponseHook          = (*InFlightLoad)(nil)
	_ epp.DataProducer          = (*SessionID)(nil)
	_ epp.PreRequestHook        = (*SessionID)(nil)
	_ epp.DataProducer          = (*BurstPrefix)(nil)
	_ epp.DataConsumer          = (*BurstPrefix)(nil)
	_ epp.Waiter                = (*BurstPrefix)(nil)
	_ epp.Scorer                = (*V02Estimate)(nil)
	_ epp.DataProducer          = (*V02Estimate)(nil)
	_ epp.PreRequestHook        = (*V02Estimate)(nil)
	_ epp.PrefixPrediction      = (*V02Estimate)(nil)
	_ epp.Scorer                = (*V02Tracking)(nil)
	_ epp.DataProducer          = (*V02Tracking)(nil)
	_ epp.KVEventConsumer       = (*V02Tracking)(nil)
	_ epp.PrefixPrediction      = (*V02Tracking)(nil)
	_ epp.GPUTelemetrySource    = (*DCGMSource)(nil)
	_ epp.GPUTelemetryExtractor = (*DCGMExtractor)(nil)
)
