// Package arch describes what one replica runs: the model's architecture,
// read from its Hugging Face config.json, and the GPU it runs on, from a
// catalogue of datasheet figures. From them it derives the quantities a
// step-time model and vLLM's KV-capacity computation need (vllm-engine.md
// B.1): parameter counts split by kind (attention, dense MLP, routed and
// shared experts, router, embeddings, lm_head), the parameters a token
// activates, weight bytes per GPU under tensor parallelism and quantisation,
// KV bytes per token, and FLOPs per token.
//
// arch knows nothing of vLLM's scheduler or of routing: replica uses it to
// size an engine, and calibration tools can use it on their own.
//
// Models: ParseModel reads a config.json (dense Llama/Mistral/Qwen2/Qwen3,
// Mixtral-style and Qwen-MoE-style mixtures of experts, DeepSeek-style
// shared experts and multi-head latent attention, Llama-4's nested
// text_config and interleaved MoE layers, FP8 and other weight-only or
// weight-and-activation quantisation). The configs of the models eppsim
// ships presets or measurements for are embedded (LookupModel, Models).
//
// GPUs: DefaultGPUs is the embedded catalogue (gpus.yaml, with the
// datasheet each figure comes from); a user's catalogue file adds entries or
// overrides fields (GPUCatalogue.Merge), and GPU.WithOverrides changes
// single fields.
package arch
