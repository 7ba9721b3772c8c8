package prefixhash

import (
	"encoding/base64"
	"fmt"
	"image"
	"strings"

	// Decoders so image.DecodeConfig can read data-URL image dimensions.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"
)

// Multimodal placeholder estimation (spec §5.2.1). The JSON shapes below are
// the token-producer's `estimate` parameters and are decoded strictly.

// EstimateConfig is the token-producer `estimate` parameter block.
type EstimateConfig struct {
	Image *ImageEstimateConfig `json:"image,omitempty"`
	Video *VideoEstimateConfig `json:"video,omitempty"`
}

// Resolution is a width and height in pixels.
type Resolution struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// ImageEstimateConfig tunes image placeholder counts: "dynamic" (default:
// width·height/factor from the decoded image or the default resolution) or
// "static" (a constant count).
type ImageEstimateConfig struct {
	Mode              string        `json:"mode,omitempty"`
	DefaultResolution *Resolution   `json:"defaultResolution,omitempty"`
	Static            *StaticImage  `json:"static,omitempty"`
	Dynamic           *DynamicImage `json:"dynamic,omitempty"`
}

// StaticImage is the static image mode's parameter.
type StaticImage struct {
	StaticToken int `json:"staticToken,omitempty"`
}

// DynamicImage is the dynamic image mode's parameter.
type DynamicImage struct {
	Factor int `json:"factor,omitempty"`
}

// VideoEstimateConfig tunes video placeholder counts:
// min(frames·tokensPerFrame, maxVideoTokens).
type VideoEstimateConfig struct {
	DefaultResolution *Resolution     `json:"defaultResolution,omitempty"`
	DefaultDuration   float64         `json:"defaultDuration,omitempty"`
	TokensPerFrame    *TokensPerFrame `json:"tokensPerFrame,omitempty"`
	Frames            *Frames         `json:"frames,omitempty"`
	MaxVideoTokens    int             `json:"maxVideoTokens,omitempty"`
}

// TokensPerFrame configures the per-frame placeholder count.
type TokensPerFrame struct {
	Mode    string               `json:"mode,omitempty"`
	Static  *StaticTokensFrame   `json:"static,omitempty"`
	Dynamic *DynamicTokensFrames `json:"dynamic,omitempty"`
}

// StaticTokensFrame is the static per-frame count.
type StaticTokensFrame struct {
	NumTokensPerFrame int `json:"numTokensPerFrame,omitempty"`
}

// DynamicTokensFrames is the dynamic per-frame factor.
type DynamicTokensFrames struct {
	Factor int `json:"factor,omitempty"`
}

// Frames configures the frame count.
type Frames struct {
	Mode      string         `json:"mode,omitempty"`
	MinFrames int            `json:"minFrames,omitempty"`
	MaxFrames int            `json:"maxFrames,omitempty"`
	Sampled   *SampledFrames `json:"sampled,omitempty"`
	Strided   *StridedFrames `json:"strided,omitempty"`
}

// SampledFrames is duration·sampleFPS frames, merged temporalPatchSize at a time.
type SampledFrames struct {
	SampleFPS         float64 `json:"sampleFPS,omitempty"`
	TemporalPatchSize int     `json:"temporalPatchSize,omitempty"`
}

// StridedFrames is duration·sourceFPS/frameStride frames.
type StridedFrames struct {
	DefaultSourceFPS float64 `json:"defaultSourceFPS,omitempty"`
	FrameStride      int     `json:"frameStride,omitempty"`
}

const (
	modeDynamic = "dynamic"
	modeStatic  = "static"
	modeSampled = "sampled"
	modeStrided = "strided"

	// DefaultImageWidth and DefaultImageHeight model a 360p image, used when
	// an image URL is not a decodable base64 data URL.
	DefaultImageWidth  = 640
	DefaultImageHeight = 360
	imageTokenFactor   = 1024

	defaultVideoDuration  = 10 // seconds
	defaultVideoSampleFPS = 2
	defaultVideoSourceFPS = 24
	videoTokenFactor      = 1024
)

// Validate checks the mode strings.
func (c *EstimateConfig) Validate() error {
	if c == nil {
		return nil
	}
	if c.Image != nil {
		if m := c.Image.Mode; m != "" && m != modeDynamic && m != modeStatic {
			return fmt.Errorf("estimate.image.mode must be %q or %q, got %q", modeDynamic, modeStatic, m)
		}
	}
	if v := c.Video; v != nil {
		if v.TokensPerFrame != nil {
			if m := v.TokensPerFrame.Mode; m != "" && m != modeDynamic && m != modeStatic {
				return fmt.Errorf("estimate.video.tokensPerFrame.mode must be %q or %q, got %q", modeDynamic, modeStatic, m)
			}
		}
		if v.Frames != nil {
			if m := v.Frames.Mode; m != "" && m != modeSampled && m != modeStrided {
				return fmt.Errorf("estimate.video.frames.mode must be %q or %q, got %q", modeSampled, modeStrided, m)
			}
		}
	}
	return nil
}

// imageCount is the placeholder count of one image given by URL: a
// data:image/...;base64 URL is decoded for its dimensions, anything else
// counts as the default resolution.
func (c *EstimateConfig) imageCount(url string) int {
	w, h, ok := imageDimensions(url)
	return c.imageCountDims(w, h, ok)
}

// imageCountDims is the placeholder count from decoded dimensions (ok) or
// the configured/default resolution.
func (c *EstimateConfig) imageCountDims(dw, dh int, ok bool) int {
	var img ImageEstimateConfig
	if c != nil && c.Image != nil {
		img = *c.Image
	}
	if img.Mode == modeStatic {
		if img.Static != nil && img.Static.StaticToken > 0 {
			return img.Static.StaticToken
		}
		return 1
	}
	w, h := DefaultImageWidth, DefaultImageHeight
	if r := img.DefaultResolution; r != nil {
		if r.Width > 0 {
			w = r.Width
		}
		if r.Height > 0 {
			h = r.Height
		}
	}
	if ok {
		w, h = dw, dh
	}
	factor := imageTokenFactor
	if img.Dynamic != nil && img.Dynamic.Factor > 0 {
		factor = img.Dynamic.Factor
	}
	if n := w * h / factor; n > 0 {
		return n
	}
	return 1
}

// imageDimensions decodes a data:image/...;base64 URL's header.
func imageDimensions(url string) (int, int, bool) {
	if !strings.HasPrefix(url, "data:image/") {
		return 0, 0, false
	}
	i := strings.Index(url, "base64,")
	if i < 0 {
		return 0, 0, false
	}
	return payloadDimensions(url[i+len("base64,"):])
}

// payloadDimensions decodes a bare base64 image payload's header.
func payloadDimensions(b64 string) (int, int, bool) {
	r := base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64))
	cfg, _, err := image.DecodeConfig(r)
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// videoCount is the placeholder count of one video (no request metadata).
func (c *EstimateConfig) videoCount() int {
	var v VideoEstimateConfig
	if c != nil && c.Video != nil {
		v = *c.Video
	}
	duration := v.DefaultDuration
	if duration <= 0 {
		duration = defaultVideoDuration
	}
	var fr Frames
	if v.Frames != nil {
		fr = *v.Frames
	}
	var frames int
	if fr.Mode == modeStrided {
		fps, stride := float64(defaultVideoSourceFPS), 1
		if fr.Strided != nil {
			if fr.Strided.DefaultSourceFPS > 0 {
				fps = fr.Strided.DefaultSourceFPS
			}
			if fr.Strided.FrameStride > 1 {
				stride = fr.Strided.FrameStride
			}
		}
		frames = int(duration*fps) / stride
		frames = clampFrames(frames, fr)
	} else {
		fps, patch := float64(defaultVideoSampleFPS), 0
		if fr.Sampled != nil {
			if fr.Sampled.SampleFPS > 0 {
				fps = fr.Sampled.SampleFPS
			}
			patch = fr.Sampled.TemporalPatchSize
		}
		frames = clampFrames(int(duration*fps), fr)
		if patch > 1 {
			frames /= patch
		}
	}
	var tpf int
	if v.TokensPerFrame != nil && v.TokensPerFrame.Mode == modeStatic {
		tpf = 1
		if s := v.TokensPerFrame.Static; s != nil && s.NumTokensPerFrame > 0 {
			tpf = s.NumTokensPerFrame
		}
	} else {
		w, h := DefaultImageWidth, DefaultImageHeight
		if r := v.DefaultResolution; r != nil {
			if r.Width > 0 {
				w = r.Width
			}
			if r.Height > 0 {
				h = r.Height
			}
		}
		factor := videoTokenFactor
		if v.TokensPerFrame != nil && v.TokensPerFrame.Dynamic != nil && v.TokensPerFrame.Dynamic.Factor > 0 {
			factor = v.TokensPerFrame.Dynamic.Factor
		}
		tpf = max(w*h/factor, 1)
	}
	tokens := frames * tpf
	if v.MaxVideoTokens > 0 && tokens > v.MaxVideoTokens {
		tokens = v.MaxVideoTokens
	}
	return max(tokens, 1)
}

func clampFrames(n int, fr Frames) int {
	if fr.MinFrames > 0 && n < fr.MinFrames {
		n = fr.MinFrames
	}
	if fr.MaxFrames > 0 && n > fr.MaxFrames {
		n = fr.MaxFrames
	}
	return n
}

// audioCount is the placeholder count of one audio clip whose asset string
// (input_audio data+format, spec §5.2.1) is asset: ceil(len/4), at least 1.
func audioCount(asset string) int {
	return max((len(asset)+BytesPerToken-1)/BytesPerToken, 1)
}
