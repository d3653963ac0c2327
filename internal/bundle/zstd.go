package bundle

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The decoder is built once, on first use; encoders are built as needed and
// kept in pools. A process that only seals reports never builds the decoder
// or the larger encoders.
//
// A fresh encoder's first frame touches memory in proportion to its window,
// which is much of the cost of sealing one report in a fresh process. So a
// payload goes to the encoders with the smallest window that holds it
// whole: every frame up to MaxWindow is single-segment, where the window
// bounds only how far back the encoder looks, and a window that holds the
// whole payload misses no match.
var (
	encoders = [...]encoderPool{
		{window: smallWindow, single: true},
		{window: MaxWindow, single: true},
		// A single-segment frame always declares its content size, even
		// below 256 bytes where a windowed frame leaves it out. Above
		// the window, single-segment frames are many times slower to
		// encode and decode, and windowed frames declare their size
		// anyway.
		{window: MaxWindow, single: false},
	}
	decoderOnce sync.Once
	decoder     *zstd.Decoder
	decoderErr  error
)

// smallWindow is the window of the encoders for payloads that fit in it.
const smallWindow = 1 << 20

// An encoderPool hands out encoders of one configuration, each to one
// goroutine at a time, the most recently returned first: a process that
// seals one bundle at a time builds one encoder and keeps to it, the one
// whose memory it has already touched.
type encoderPool struct {
	window int
	single bool
	mu     sync.Mutex
	free   []*zstd.Encoder
}

// encoderFor returns the pool whose encoders take a payload of n bytes.
func encoderFor(n int) *encoderPool {
	for i := range encoders {
		if n <= encoders[i].window {
			return &encoders[i]
		}
	}
	return &encoders[len(encoders)-1]
}

func (p *encoderPool) get() (*zstd.Encoder, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		e := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithWindowSize(p.window),
		zstd.WithEncoderCRC(true),
		zstd.WithZeroFrames(true),
		zstd.WithLowerEncoderMem(true),
		zstd.WithSingleSegment(p.single),
		zstd.WithEncoderConcurrency(1),
	)
}

func (p *encoderPool) put(e *zstd.Encoder) {
	p.mu.Lock()
	// Idle encoders beyond what the cores can use are left to the
	// collector.
	if len(p.free) < 2*runtime.GOMAXPROCS(0) {
		p.free = append(p.free, e)
	}
	p.mu.Unlock()
}

// maxBlock is zstd's Block_Maximum_Size: no block regenerates more.
const maxBlock = 128 << 10

func zstdDecoder() (*zstd.Decoder, error) {
	decoderOnce.Do(func() {
		// checkFrame has already bounded the declared size; these limits
		// are the decoder's own backstop, one block above the largest
		// frame a reader accepts so the frame-size check fires first.
		decoder, decoderErr = zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(MaxPayload+maxBlock),
			zstd.WithDecoderMaxWindow(MaxPayload+maxBlock),
			zstd.WithDecoderConcurrency(0),
		)
	})
	return decoder, decoderErr
}

// appendCompressed appends payload as one zstd frame.
func appendCompressed(dst, payload []byte) ([]byte, error) {
	p := encoderFor(len(payload))
	enc, err := p.get()
	if err != nil {
		return nil, err
	}
	dst = enc.EncodeAll(payload, dst)
	p.put(enc)
	return dst, nil
}

// frameInfo describes a zstd frame that passed checkFrame.
type frameInfo struct {
	contentSize int
	checksum    bool
}

// checkFrame checks, without decompressing, that b is exactly one zstd frame
// of the shape muster-bundle(5) allows and that its declared content size is
// within limit. Walking the block headers finds the frame's end, so bytes
// after it are caught, and bounds what raw and RLE blocks regenerate.
func checkFrame(b []byte, limit int, subj string) (frameInfo, error) {
	var fi frameInfo
	bad := func(format string, args ...any) error {
		return refuse(subj, ErrFormat, "payload: "+format, args...)
	}
	if len(b) < 5 {
		return fi, bad("too short for a zstd frame (%d bytes)", len(b))
	}
	if binary.LittleEndian.Uint32(b) != 0xFD2FB528 {
		return fi, bad("not a zstd frame (magic %#08x)", binary.LittleEndian.Uint32(b))
	}
	fhd := b[4]
	p := 5
	fcsFlag := fhd >> 6
	single := fhd&0x20 != 0
	fi.checksum = fhd&0x04 != 0
	if fhd&0x08 != 0 {
		return fi, bad("zstd frame header has the reserved bit set")
	}
	if fhd&0x03 != 0 {
		return fi, bad("zstd frame names a dictionary")
	}
	if !single {
		if len(b) < p+1 {
			return fi, bad("zstd frame header is truncated")
		}
		wd := b[p]
		p++
		base := uint64(1) << (10 + wd>>3)
		window := base + base/8*uint64(wd&7)
		if window > MaxWindow {
			return fi, refuse(subj, ErrTooLarge, "payload: zstd window is %d bytes, limit is %d", window, MaxWindow)
		}
	}
	fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		fcsLen = 1
	}
	if fcsLen == 0 {
		return fi, bad("zstd frame does not declare its content size")
	}
	if len(b) < p+fcsLen {
		return fi, bad("zstd frame header is truncated")
	}
	var fcs uint64
	switch fcsLen {
	case 1:
		fcs = uint64(b[p])
	case 2:
		fcs = uint64(binary.LittleEndian.Uint16(b[p:])) + 256
	case 4:
		fcs = uint64(binary.LittleEndian.Uint32(b[p:]))
	case 8:
		fcs = binary.LittleEndian.Uint64(b[p:])
	}
	p += fcsLen
	if fcs > uint64(limit) {
		return fi, refuse(subj, ErrTooLarge, "payload decompresses to %d bytes, limit is %d", fcs, limit)
	}
	fi.contentSize = int(fcs)
	var literal uint64 // bytes regenerated by raw and RLE blocks
	for {
		if len(b) < p+3 {
			return fi, bad("zstd frame is truncated in a block header")
		}
		bh := uint32(b[p]) | uint32(b[p+1])<<8 | uint32(b[p+2])<<16
		p += 3
		last := bh&1 != 0
		size := int(bh >> 3)
		if size > maxBlock {
			return fi, bad("zstd block of %d bytes exceeds %d", size, maxBlock)
		}
		var stored int
		switch (bh >> 1) & 3 {
		case 0: // raw
			stored = size
			literal += uint64(size)
		case 1: // RLE: one byte, repeated size times
			stored = 1
			literal += uint64(size)
		case 2: // compressed
			stored = size
		default:
			return fi, bad("zstd block has the reserved type")
		}
		if literal > fcs {
			return fi, refuse(subj, ErrTooLarge, "payload: zstd blocks regenerate more than the %d bytes the frame declares", fcs)
		}
		if len(b) < p+stored {
			return fi, bad("zstd frame is truncated in a block")
		}
		p += stored
		if last {
			break
		}
	}
	if fi.checksum {
		if len(b) < p+4 {
			return fi, bad("zstd frame is truncated in its checksum")
		}
		p += 4
	}
	if p != len(b) {
		return fi, refuse(subj, ErrTrailing, "payload continues %d bytes past its zstd frame", len(b)-p)
	}
	return fi, nil
}

// decompress checks the frame and decompresses it into a buffer of exactly
// its declared size.
func decompress(b []byte, limit int, subj string) ([]byte, error) {
	fi, err := checkFrame(b, limit, subj)
	if err != nil {
		return nil, err
	}
	dec, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	// DecodeAll sizes its output from the declared size, which checkFrame
	// bounded; a buffer of exactly that size would leave the decoder no
	// slack and send it down a much slower path.
	out, err := dec.DecodeAll(b, nil)
	if err != nil {
		if errors.Is(err, zstd.ErrFrameSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, refuse(subj, ErrTooLarge, "payload decompresses past the %d bytes its frame declares", fi.contentSize)
		}
		return nil, refuse(subj, ErrFormat, "payload does not decompress: %v", err)
	}
	if len(out) != fi.contentSize {
		return nil, refuse(subj, ErrFormat, "payload decompresses to %d bytes, its frame declares %d", len(out), fi.contentSize)
	}
	return out, nil
}
