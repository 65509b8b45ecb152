package provider

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sseEvent is one server-sent event: its "event:" name ("" when the server
// gave none) and its data lines joined by "\n".
type sseEvent struct {
	Name string
	Data string
}

// maxEventBytes bounds one event's data so a broken or hostile server cannot
// grow it without end; real model events are a few KB.
const maxEventBytes = 8 << 20

// sseReader decodes a text/event-stream as the WHATWG HTML spec describes it:
// lines end in LF, CRLF or a lone CR; a line starting with ':' is a comment;
// "field: value" loses one space after the colon; data lines accumulate and a
// blank line dispatches them; id and retry (and unknown fields) are ignored.
type sseReader struct {
	r       *bufio.Reader
	line    []byte
	skipLF  bool // the previous line ended in CR, so a following LF is part of it
	started bool // past the first line, where a byte order mark is dropped
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReader(r)}
}

// Next returns the next event with data. At the end of the stream it returns
// io.EOF; an event cut off by the end (no blank line after it) is still
// returned first, since servers that close right after the last data line
// exist and its JSON is checked by the caller anyway.
func (s *sseReader) Next() (sseEvent, error) {
	var (
		ev      sseEvent
		data    []byte
		hasData bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && hasData {
				ev.Data = string(data)
				return ev, nil
			}
			return sseEvent{}, err
		}
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		if len(line) == 0 { // blank line: dispatch
			if hasData {
				ev.Data = string(data)
				return ev, nil
			}
			ev = sseEvent{} // an event with no data is dropped, name and all
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > maxEventBytes {
				return sseEvent{}, fmt.Errorf("event stream: an event is larger than %d bytes", maxEventBytes)
			}
			data = append(data, value...)
			hasData = true
		}
	}
}

// readLine returns the next line without its terminator. At the end of the
// stream it returns a last unterminated line if there is one, and io.EOF
// (with a nil line) after that.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(s.line) > 0 {
				return s.line, nil
			}
			return nil, err
		}
		if s.skipLF {
			s.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return s.line, nil
		case '\r':
			s.skipLF = true
			return s.line, nil
		}
		if len(s.line) > maxEventBytes {
			return nil, fmt.Errorf("event stream: a line is longer than %d bytes", maxEventBytes)
		}
		s.line = append(s.line, b)
	}
}
