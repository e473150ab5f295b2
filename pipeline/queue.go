package pipeline

// sendQueue lets a hub goroutine send without ever blocking: values wait in
// the queue and the hub's select offers the head only while the queue is
// not empty (a nil channel disables the case).
type sendQueue[T any] struct {
	items []T
	head  int
}

func (q *sendQueue[T]) push(v T) { q.items = append(q.items, v) }

// next returns ch and the head value, or a nil channel when q is empty.
func (q *sendQueue[T]) next(ch chan<- T) (chan<- T, T) {
	var zero T
	if q.head == len(q.items) {
		return nil, zero
	}
	return ch, q.items[q.head]
}

// pop removes the head after it was sent.
func (q *sendQueue[T]) pop() {
	var zero T
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

func (q *sendQueue[T]) len() int { return len(q.items) - q.head }
