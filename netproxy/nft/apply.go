package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options says where a Conn works.
type Options struct {
	// NetNS is the path of a network namespace file (/run/netns/x,
	// /proc/<pid>/ns/net); "" is the process's current namespace.
	NetNS string
}

// Conn applies transactions to the kernel's nftables in one network
// namespace. It is safe for concurrent use; Applies are serialized.
//
// google/nftables builds every netlink message, but Conn sends the batch
// itself rather than through the library's Flush, which asks the kernel
// for an acknowledgement of every message and an echo of every rule:
// hundreds of thousands of replies for a full sync, each needing room in
// the receive buffer and a receive call, and whose joined errors cannot
// say which operation failed. Sent without those flags, the kernel
// answers only the messages it refuses, each by its sequence number.
type Conn struct {
	mu     sync.Mutex
	ns     netns.NsHandle // -1: the current namespace
	batch  *netlink.Conn  // NETLINK_NETFILTER socket the batches go through
	list   *nftables.Conn // reads (Existing)
	sndbuf int            // current send buffer size (a batch is one datagram)
	seq    uint32
	buf    []byte // the serialized batch, reused
	rbuf   []byte // replies
}

// keptBuffer is the largest serialized batch a Conn keeps for reuse.
const keptBuffer = 1 << 20

// replyBuffer holds the error replies of one batch (about 1 KiB each in
// kernel accounting); if more are refused, the overflow is itself proof
// the batch failed.
const replyBuffer = 4 << 20

// Open connects to nftables in the namespace opts names.
func Open(opts Options) (*Conn, error) {
	c := &Conn{ns: -1}
	cfg := &netlink.Config{}
	var lopts []nftables.ConnOption
	if opts.NetNS != "" {
		h, err := netns.GetFromPath(opts.NetNS)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", opts.NetNS, err)
		}
		c.ns = h
		cfg.NetNS = int(h)
		lopts = append(lopts, nftables.WithNetNSFd(int(h)))
	}
	var err error
	if c.batch, err = netlink.Dial(unix.NETLINK_NETFILTER, cfg); err != nil {
		c.closeNS()
		return nil, fmt.Errorf("nftables netlink socket: %w", err)
	}
	if err := c.setupSocket(); err != nil {
		_ = c.batch.Close()
		c.closeNS()
		return nil, err
	}
	if c.list, err = nftables.New(append(lopts, nftables.AsLasting())...); err != nil {
		_ = c.batch.Close()
		c.closeNS()
		return nil, fmt.Errorf("nftables netlink socket: %w", err)
	}
	return c, nil
}

func (c *Conn) setupSocket() error {
	// Capped acks carry only the refused message's header, which is all
	// we need (its sequence number), not the whole message back.
	for _, o := range []netlink.ConnOption{netlink.CapAcknowledge, netlink.ExtendedAcknowledge} {
		if err := c.batch.SetOption(o, true); err != nil {
			return fmt.Errorf("netlink socket option: %w", err)
		}
	}
	return c.setBuffer(unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, replyBuffer)
}

// setBuffer sets a socket buffer size; the FORCE variant (root) ignores
// the system-wide maximum, which a full sync's batch exceeds.
func (c *Conn) setBuffer(force, plain, size int) error {
	rc, err := c.batch.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, force, size); serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, plain, size)
		}
	}); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("netlink socket buffer of %d bytes: %w", size, serr)
	}
	return nil
}

func (c *Conn) closeNS() {
	if c.ns >= 0 {
		_ = c.ns.Close()
		c.ns = -1
	}
}

// Close releases the netlink sockets and the namespace handle.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := errors.Join(c.batch.Close(), c.list.CloseLasting())
	c.closeNS()
	return err
}

// OpError is the refusal of one operation of a transaction: the
// transaction was not applied at all.
type OpError struct {
	// Index is the operation's position in Tx.Ops, -1 when the kernel
	// refused the batch as a whole.
	Index int
	// Op is the operation as Tx.String renders it (shortened).
	Op string
	// Err is the cause: a syscall.Errno from the kernel, possibly with
	// its message, or why the operation could not be expressed.
	Err error
	// Others counts further operations refused in the same batch (often
	// consequences of the first).
	Others int
}

func (e *OpError) Error() string {
	s := fmt.Sprintf("op %d (%s): %v", e.Index, e.Op, e.Err)
	if e.Index < 0 {
		s = fmt.Sprintf("batch: %v", e.Err)
	}
	if e.Others > 0 {
		s += fmt.Sprintf(" (and %d more refused)", e.Others)
	}
	return s
}

func (e *OpError) Unwrap() error { return e.Err }

func (tx *Tx) opError(i int, err error) *OpError {
	const max = 240
	s := tx.renderOp(tx.Ops[i])
	if len(s) > max {
		s = s[:max] + "…"
	}
	return &OpError{Index: i, Op: s, Err: err}
}

// Apply sends tx as one netlink batch: the kernel applies all of its
// operations or, if it refuses any, none. A refusal is an *OpError.
func (c *Conn) Apply(tx *Tx) error {
	if len(tx.Ops) == 0 {
		return nil
	}
	b, err := newBuilder(tx)
	if err != nil {
		return err
	}
	msgs, err := b.build()
	if err != nil || msgs == nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.seq + 1
	c.seq += uint32(len(msgs))
	buf := appendBatch(c.buf[:0], msgs, first)
	// Keep the buffer for the small batches of incremental updates, not
	// the tens of megabytes of a full sync.
	if cap(buf) <= keptBuffer {
		c.buf = buf
	}
	refused, err := c.exchange(buf)
	if err != nil {
		return fmt.Errorf("apply %d ops to table %s %s: %w", len(tx.Ops), tx.Table.Family, tx.Table.Name, err)
	}
	if len(refused) == 0 {
		return nil
	}
	return b.refusal(refused, first)
}

// refusal turns the kernel's error replies into an OpError for the first
// refused operation.
func (b *builder) refusal(refused []nlError, first uint32) error {
	var oe *OpError
	for _, r := range refused {
		i := int(r.seq - first) // message index in the batch, 0 = batch begin
		var cur *OpError
		if i <= 0 || i > len(b.opOf) {
			cur = &OpError{Index: -1, Err: r.err}
		} else {
			cur = b.tx.opError(int(b.opOf[i-1]), r.err)
		}
		if oe == nil || (oe.Index < 0 && cur.Index >= 0) || (cur.Index >= 0 && cur.Index < oe.Index) {
			if oe != nil {
				cur.Others = oe.Others + 1
			}
			oe = cur
		} else {
			oe.Others++
		}
	}
	return oe
}

// exchange sends one batch and collects the kernel's refusals. The
// kernel processes a batch inside the send call, so every reply is
// queued by the time it returns and the socket is drained without
// waiting.
func (c *Conn) exchange(batch []byte) ([]nlError, error) {
	if need := len(batch) + 64<<10; need > c.sndbuf {
		if err := c.setBuffer(unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, need); err != nil {
			return nil, err
		}
		c.sndbuf = need
	}
	rc, err := c.batch.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		refused []nlError
		ioErr   error
	)
	if err := rc.Control(func(fd uintptr) {
		_, _ = c.drain(int(fd), nil) // nothing should be left; never mix batches
		if ioErr = unix.Sendto(int(fd), batch, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); ioErr != nil {
			ioErr = fmt.Errorf("send batch of %d bytes: %w", len(batch), ioErr)
			return
		}
		refused, ioErr = c.drain(int(fd), refused)
	}); err != nil {
		return nil, err
	}
	return refused, ioErr
}

// nlError is the kernel's refusal of the message with sequence seq.
type nlError struct {
	seq uint32
	err error
}

// errRepliesLost: the receive buffer overflowed, so some replies were
// dropped; replies are only ever refusals, so the batch failed.
var errRepliesLost = errors.New("more refusals than the receive buffer holds")

func (c *Conn) drain(fd int, out []nlError) ([]nlError, error) {
	if c.rbuf == nil {
		c.rbuf = make([]byte, 64<<10)
	}
	lost := false
	for {
		n, _, err := unix.Recvfrom(fd, c.rbuf, unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if lost {
				out = append(out, nlError{err: errRepliesLost})
			}
			return out, nil
		case err == unix.ENOBUFS:
			lost = true
			continue
		case err != nil:
			return out, fmt.Errorf("receive replies: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(c.rbuf[:n])
		if err != nil {
			return out, fmt.Errorf("parse replies: %w", err)
		}
		for _, m := range msgs {
			if e, ok := parseNLError(m); ok {
				out = append(out, e)
			}
		}
	}
}

// parseNLError reads an NLMSG_ERROR reply: errno, the refused message's
// header (capped acks carry no payload), then the kernel's message if it
// gave one.
func parseNLError(m syscall.NetlinkMessage) (nlError, bool) {
	if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4+unix.SizeofNlMsghdr {
		return nlError{}, false
	}
	errno := -int32(binary.NativeEndian.Uint32(m.Data[:4]))
	if errno == 0 {
		return nlError{}, false
	}
	seq := binary.NativeEndian.Uint32(m.Data[4+8 : 4+12])
	var err error = syscall.Errno(errno)
	if m.Header.Flags&unix.NLM_F_ACK_TLVS != 0 {
		off := 4 + unix.SizeofNlMsghdr
		if m.Header.Flags&unix.NLM_F_CAPPED == 0 { // the refused message follows in full
			off = 4 + int(binary.NativeEndian.Uint32(m.Data[4:]))
		}
		if off <= len(m.Data) {
			if msg := extackMessage(m.Data[off:]); msg != "" {
				err = fmt.Errorf("%s: %w", msg, err)
			}
		}
	}
	return nlError{seq: seq, err: err}, true
}

func extackMessage(tlvs []byte) string {
	attrs, err := netlink.UnmarshalAttributes(tlvs)
	if err != nil {
		return ""
	}
	for _, a := range attrs {
		if a.Type == unix.NLMSGERR_ATTR_MSG && len(a.Data) > 1 {
			return string(a.Data[:len(a.Data)-1])
		}
	}
	return ""
}

// appendBatch serializes msgs (batch begin … batch end) with sequence
// numbers from first, and without the acknowledgement and echo requests
// google/nftables puts on every message.
func appendBatch(buf []byte, msgs []netlink.Message, first uint32) []byte {
	size := len(buf)
	for _, m := range msgs {
		size += unix.SizeofNlMsghdr + (len(m.Data)+3)&^3
	}
	if size > cap(buf) {
		buf = append(make([]byte, 0, size), buf...)
	}
	for i, m := range msgs {
		l := unix.SizeofNlMsghdr + len(m.Data)
		flags := uint16(m.Header.Flags) &^ (unix.NLM_F_ACK | unix.NLM_F_ECHO)
		buf = binary.NativeEndian.AppendUint32(buf, uint32(l))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(m.Header.Type))
		buf = binary.NativeEndian.AppendUint16(buf, flags)
		buf = binary.NativeEndian.AppendUint32(buf, first+uint32(i))
		buf = binary.NativeEndian.AppendUint32(buf, 0) // port id: the kernel's
		buf = append(buf, m.Data...)
		for l%4 != 0 {
			buf = append(buf, 0)
			l++
		}
	}
	return buf
}

// builder has google/nftables serialize a transaction: its Conn, dialled
// to a capture function instead of the kernel, hands the finished batch
// over on Flush.
type builder struct {
	tx    *Tx
	table *nftables.Table
	nl    *nftables.Conn
	// captured is the batch google/nftables produced.
	captured []netlink.Message
	// opOf maps each message (batch begin/end excluded) to its op.
	opOf []int32
	// anonSets are the messages creating anonymous maps, with the
	// element count to declare when the elements follow in several
	// messages (0: they came with the set).
	anonSets []anonSetMsg
	setID    uint32
}

type anonSetMsg struct {
	msg, size int
}

func newBuilder(tx *Tx) (*builder, error) {
	t, err := nftTable(tx.Table)
	if err != nil {
		return nil, err
	}
	b := &builder{tx: tx, table: t, opOf: make([]int32, 0, len(tx.Ops))}
	b.nl, err = nftables.New(nftables.WithTestDial(b.capture))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// capture receives the batch Flush sends. Flush then reads one reply per
// message; there is none (nil, io.EOF), which it takes as done.
func (b *builder) capture(req []netlink.Message) ([]netlink.Message, error) {
	if req == nil {
		return nil, io.EOF
	}
	b.captured = req
	return nil, nil
}

func nftTable(t Table) (*nftables.Table, error) {
	switch t.Family {
	case IPv4:
		return &nftables.Table{Name: t.Name, Family: nftables.TableFamilyIPv4}, nil
	case IPv6:
		return &nftables.Table{Name: t.Name, Family: nftables.TableFamilyIPv6}, nil
	}
	return nil, fmt.Errorf("table %s: unknown family %d", t.Name, t.Family)
}

// build serializes every op and returns the batch.
func (b *builder) build() ([]netlink.Message, error) {
	for i, op := range b.tx.Ops {
		n, err := b.queue(op)
		if err != nil {
			return nil, b.tx.opError(i, err)
		}
		for ; n > 0; n-- {
			b.opOf = append(b.opOf, int32(i))
		}
	}
	if len(b.opOf) == 0 {
		return nil, nil // e.g. only empty element lists
	}
	if err := b.nl.Flush(); err != nil {
		return nil, fmt.Errorf("serialize %d ops: %w", len(b.tx.Ops), err)
	}
	// The op of each message is known only by counting what each library
	// call adds; a library that adds otherwise must not go unnoticed.
	if len(b.captured) != len(b.opOf)+2 {
		return nil, fmt.Errorf("internal: google/nftables produced %d messages for %d expected", len(b.captured)-2, len(b.opOf))
	}
	for _, a := range b.anonSets {
		if err := patchAnonSet(&b.captured[a.msg+1], a.size); err != nil {
			return nil, b.tx.opError(int(b.opOf[a.msg]), err)
		}
	}
	return b.captured, nil
}

// patchAnonSet edits, in place, the message creating an anonymous map:
//   - the key byte order google/nftables records for every anonymous set
//     (big endian) becomes host order, which is what numgen keys are: the
//     kernel never reads it, but nft prints the keys from it (`1 : goto`,
//     not `16777216 : goto`);
//   - size > 0 is declared as the set's size when its elements follow in
//     several messages (the kernel refuses elements beyond it).
func patchAnonSet(m *netlink.Message, size int) error {
	if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSET) || len(m.Data) < 4 {
		return errors.New("internal: anonymous map message is not a new set")
	}
	ud := findAttr(m.Data[4:], unix.NFTA_SET_USERDATA)
	// userdata TLVs: type (1 byte), length (1 byte), value
	for ; len(ud) >= 2 && len(ud) >= 2+int(ud[1]); ud = ud[2+int(ud[1]):] {
		if userdata.Type(ud[0]) == userdata.NFTNL_UDATA_SET_KEYBYTEORDER && ud[1] == 4 {
			binary.LittleEndian.PutUint32(ud[2:6], 1) // NFT_BYTEORDER_HOST
			break
		}
	}
	if len(ud) < 6 {
		return errors.New("internal: anonymous map message without key byte order")
	}
	if size > 0 {
		v := findAttr(findAttr(m.Data[4:], unix.NFTA_SET_DESC), unix.NFTA_SET_DESC_SIZE)
		if len(v) != 4 {
			return errors.New("internal: anonymous map message without size")
		}
		binary.BigEndian.PutUint32(v, uint32(size))
	}
	return nil
}

// findAttr returns the value of the first attribute of type typ in attrs
// (a slice of the message, so writes to it edit the message).
func findAttr(attrs []byte, typ uint16) []byte {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		if l < 4 || l > len(attrs) {
			return nil
		}
		if binary.NativeEndian.Uint16(attrs[2:])&^uint16(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER) == typ {
			return attrs[4:l]
		}
		next := (l + 3) &^ 3
		if next >= len(attrs) {
			return nil
		}
		attrs = attrs[next:]
	}
	return nil
}

func (b *builder) nextSetID() uint32 {
	b.setID++
	return b.setID
}

// maxElementBytes bounds the element list of one message: a netlink
// attribute's length is 16 bits, and mdlayher/netlink wraps a longer one
// silently rather than failing.
const maxElementBytes = 32 << 10

// elementBytes over-estimates an element's encoded size: nesting,
// a key of up to 24 bytes, a verdict and its chain name.
func elementBytes(chain string) int { return 96 + len(chain) }

// chunks splits n elements into runs [start, end) that each fit one
// message.
func chunks(n int, size func(i int) int) [][2]int {
	if n == 0 {
		return nil
	}
	var out [][2]int
	start, sum := 0, 0
	for i := 0; i < n; i++ {
		if sz := size(i); sum+sz > maxElementBytes && i > start {
			out = append(out, [2]int{start, i})
			start, sum = i, sz
		} else {
			sum += sz
		}
	}
	return append(out, [2]int{start, n})
}

var hooks = map[Hook]*nftables.ChainHook{
	HookPrerouting:  nftables.ChainHookPrerouting,
	HookInput:       nftables.ChainHookInput,
	HookForward:     nftables.ChainHookForward,
	HookOutput:      nftables.ChainHookOutput,
	HookPostrouting: nftables.ChainHookPostrouting,
}

// queue has the library serialize op and says how many messages that
// added.
func (b *builder) queue(op Op) (int, error) {
	t := b.table
	switch op.Kind {
	case OpAddTable:
		b.nl.AddTable(t)
	case OpAddChain:
		ch := &nftables.Chain{Name: op.Chain.Name, Table: t}
		if op.Chain.IsBase() {
			h, ok := hooks[op.Chain.Hook]
			if !ok {
				return 0, fmt.Errorf("unknown hook %q", op.Chain.Hook)
			}
			prio := nftables.ChainPriority(op.Chain.Priority)
			ch.Hooknum, ch.Priority, ch.Type = h, &prio, nftables.ChainType(op.Chain.Type)
		}
		b.nl.AddChain(ch)
	case OpFlushChain:
		b.nl.FlushChain(&nftables.Chain{Name: op.Chain.Name, Table: t})
	case OpDeleteChain:
		b.nl.DelChain(&nftables.Chain{Name: op.Chain.Name, Table: t})
	case OpAddRule:
		return b.queueRule(op.Rule)
	case OpAddSet:
		s, err := setSpec(t, op.Set)
		if err != nil {
			return 0, err
		}
		// An ID of our own keeps the library off its unsynchronized
		// global counter.
		s.ID = b.nextSetID()
		return 1, b.nl.AddSet(s, nil)
	case OpFlushSet:
		b.nl.FlushSet(&nftables.Set{Table: t, Name: op.Set.Name})
	case OpDeleteSet:
		b.nl.DelSet(&nftables.Set{Table: t, Name: op.Set.Name})
	case OpAddElements, OpDeleteElements:
		return b.queueElements(op)
	default:
		return 0, fmt.Errorf("unknown op kind %d", op.Kind)
	}
	return 1, nil
}

func (b *builder) queueRule(r Rule) (int, error) {
	rb := ruleBuilder{table: b.table, fam: b.tx.Table.Family, nextID: b.nextSetID,
		exprs: make([]expr.Any, 0, 4*len(r.Stmts))}
	for _, s := range r.Stmts {
		if err := rb.stmt(s); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, a := range rb.anon {
		m, err := b.queueAnonMap(a, len(b.opOf)+n)
		if err != nil {
			return 0, err
		}
		n += m
	}
	nr := &nftables.Rule{Table: b.table, Chain: &nftables.Chain{Name: r.Chain, Table: b.table}, Exprs: rb.exprs}
	if r.Comment != "" {
		nr.UserData = userdata.AppendString(nil, userdata.TypeComment, r.Comment)
	}
	b.nl.AddRule(nr)
	return n + 1, nil
}

// queueAnonMap adds an anonymous map (its first message is msg) and its
// elements, in several messages if they do not fit one: the kernel takes
// elements for a new anonymous set until a rule binds it.
func (b *builder) queueAnonMap(a anonMap, msg int) (int, error) {
	parts := chunks(len(a.elems), func(i int) int { return elementBytes(a.elems[i].VerdictData.Chain) })
	if len(parts) == 1 {
		b.anonSets = append(b.anonSets, anonSetMsg{msg: msg})
		return 2, b.nl.AddSet(a.set, a.elems) // the set, then its elements
	}
	b.anonSets = append(b.anonSets, anonSetMsg{msg: msg, size: len(a.elems)})
	if err := b.nl.AddSet(a.set, nil); err != nil {
		return 0, err
	}
	// The library refuses to add to an anonymous set; the message it
	// makes for a named one names the set by the same ID.
	named := *a.set
	named.Anonymous = false
	for _, p := range parts {
		if err := b.nl.SetAddElements(&named, a.elems[p[0]:p[1]]); err != nil {
			return 0, err
		}
	}
	return 1 + len(parts), nil
}

func (b *builder) queueElements(op Op) (int, error) {
	s := &nftables.Set{Table: b.table, Name: op.Set.Name, IsMap: op.Set.Verdict}
	n := 0
	for _, p := range chunks(len(op.Elements), func(i int) int { return elementBytes(op.Elements[i].Verdict.Chain) }) {
		els, err := setElements(op.Set, op.Elements[p[0]:p[1]], op.Kind == OpAddElements)
		if err != nil {
			return 0, err
		}
		if op.Kind == OpAddElements {
			err = b.nl.SetAddElements(s, els)
		} else {
			err = b.nl.SetDeleteElements(s, els)
		}
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// Existing lists the chains and the named sets and maps now in table t.
// A missing table has none.
func (c *Conn) Existing(t Table) (chains []string, sets []string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nt, err := nftTable(t)
	if err != nil {
		return nil, nil, err
	}
	// Only the table lookup keeps the kernel's ENOENT reachable through
	// errors.Is (GetSets formats it away).
	if _, err := c.list.ListTableOfFamily(t.Name, nt.Family); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("list table %s %s: %w", t.Family, t.Name, err)
	}
	all, err := c.list.ListChainsOfTableFamily(nt.Family)
	if err != nil {
		return nil, nil, fmt.Errorf("list chains of %s %s: %w", t.Family, t.Name, err)
	}
	for _, ch := range all {
		if ch.Table.Name == t.Name {
			chains = append(chains, ch.Name)
		}
	}
	ss, err := c.list.GetSets(nt)
	if err != nil {
		return nil, nil, fmt.Errorf("list sets of %s %s: %w", t.Family, t.Name, err)
	}
	for _, s := range ss {
		if !s.Anonymous {
			sets = append(sets, s.Name)
		}
	}
	return chains, sets, nil
}
