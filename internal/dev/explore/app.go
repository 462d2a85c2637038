package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbworker/ddbworker/inbox"
	"github.com/ddbworker/ddbworker/tables"
)

// The adopted variant: the run's table is an existing single-table
// application's — its own GSI1 on GSI1PK/GSI1SK (projection ALL, the
// common convention), TTL on its own expiresAt or off, a few hundred
// customers and orders, some carrying the default TTL attribute `ttl` with
// epoch seconds in the past — adopted as a team would adopt it: a plan
// with the defaults (which must be blocked), then the plan and the
// adoption with the layout the blocked plan proposes, recorded in the
// table. Every host reads the layout from the record. While the stream
// runs, the application keeps writing its own items; the checker then
// reads them back attribute by attribute, the application's index and the
// table's TTL (checkApp).
const (
	appIndex   = "GSI1"
	appIndexPK = "GSI1PK"
	appIndexSK = "GSI1SK"
	appTTLAttr = "expiresAt"
	// appCustomer starts every application item's partition key.
	appCustomer = "CUSTOMER#"
)

// AppTable is the drawn application table.
type AppTable struct {
	// TTL: the table's TTL is on the application's expiresAt (else off).
	TTL bool
	// Customers and Orders are how many items it holds before adoption.
	Customers, Orders int
	// Every is how often the application writes during the stream.
	Every time.Duration
	// seed draws the items and the application's writes.
	seed uint64
}

func (a *AppTable) String() string {
	ttl := "TTL off"
	if a.TTL {
		ttl = "TTL on " + appTTLAttr
	}
	return fmt.Sprintf("application table adopted (its %s on %s/%s ALL, %s; %d customers, %d orders, some carrying %s or a past ttl); the application writes every %s",
		appIndex, appIndexPK, appIndexSK, ttl, a.Customers, a.Orders, appTTLAttr, a.Every)
}

// drawApp draws the adopted variant for a quarter of the seeds, nil for
// the others.
func drawApp(r *rand.Rand) *AppTable {
	if r.IntN(4) != 0 {
		return nil
	}
	c := 40 + r.IntN(41)
	return &AppTable{TTL: r.IntN(2) == 0, Customers: c, Orders: 3*c + r.IntN(2*c),
		Every: []time.Duration{30 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond}[r.IntN(3)], seed: r.Uint64()}
}

// appState is the application's side of a run: what it last wrote of
// each item (the checker's expectation), and what the table looked like
// before adoption.
type appState struct {
	t      *AppTable
	r      *rand.Rand
	mu     sync.Mutex
	items  map[string]map[string]ddbAV // "PK|SK" → attributes as last written
	orders []string                    // keys of the orders, in creation order
	// unsure are keys whose last write ended in an error that may not
	// tell whether it applied (a timeout): not compared.
	unsure map[string]bool
	before appShape
	layout tables.Layout
	writes int
	// inAggregate counts the items in the adopted aggregate index at the
	// end: the hosts wrote their records under the recorded layout.
	inAggregate int
	failed      []Violation
	adopted     string // what the adoption did, for the progress line
}

// appShape is what adoption must leave as it was: the application's index
// (key schema and projection) and the table's TTL.
type appShape struct {
	index string // "GSI1PK HASH, GSI1SK RANGE; ALL", "" when missing
	ttl   string // "ENABLED expiresAt", "DISABLED"
}

func appKey(pk, sk string) string { return pk + "|" + sk }

func s(v string) ddbAV { return &ddbS{Value: v} }
func n(v int64) ddbAV  { return &ddbN{Value: strconv.FormatInt(v, 10)} }

// showAV is an attribute value as the checker compares it.
func showAV(av ddbAV) string {
	switch v := av.(type) {
	case *ddbS:
		return "S:" + v.Value
	case *ddbN:
		return "N:" + v.Value
	case nil:
		return "(absent)"
	}
	return fmt.Sprintf("%T:%v", av, av)
}

var appStatuses = []string{"PLACED", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"}

// order is an order item as the application writes it.
func (a *appState) order(cust, id string, status string, now time.Time) map[string]ddbAV {
	it := map[string]ddbAV{"PK": s(appCustomer + cust), "SK": s("ORDER#" + id), "orderId": s(id), "status": s(status),
		"total": n(int64(100 + a.r.IntN(99900))), appIndexPK: s("STATUS#" + status), appIndexSK: s("ORDER#" + now.UTC().Format(time.RFC3339Nano) + "#" + id)}
	switch a.r.IntN(6) {
	case 0: // a cart that expires: the application's own TTL attribute
		it[appTTLAttr] = n(now.Add(time.Duration(1+a.r.IntN(48)) * time.Hour).Unix())
	case 1: // a legacy attribute named as ddbworker's default TTL, in the past
		it["ttl"] = n(now.Add(-time.Duration(1+a.r.IntN(400)) * 24 * time.Hour).Unix())
	}
	return it
}

// createApp creates and fills the application's table.
func (x *run) createApp(ctx context.Context) error {
	t := x.s.App
	a := &appState{t: t, r: rand.New(rand.NewPCG(t.seed, 0x617070)), items: map[string]map[string]ddbAV{}, unsure: map[string]bool{}}
	x.app = a
	str := ddbtypes.ScalarAttributeTypeS
	_, err := x.admin.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(x.table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: str}, {AttributeName: aws.String("SK"), AttributeType: str},
			{AttributeName: aws.String(appIndexPK), AttributeType: str}, {AttributeName: aws.String(appIndexSK), AttributeType: str}},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("SK"), KeyType: ddbtypes.KeyTypeRange}},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String(appIndex),
			KeySchema:  []ddbtypes.KeySchemaElement{{AttributeName: aws.String(appIndexPK), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String(appIndexSK), KeyType: ddbtypes.KeyTypeRange}},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll}}}})
	if err != nil {
		return fmt.Errorf("creating the application's table: %w", err)
	}
	if err := dynamodb.NewTableExistsWaiter(x.admin).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(x.table)}, time.Minute); err != nil {
		return err
	}
	if t.TTL {
		if _, err := x.admin.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(x.table),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(appTTLAttr), Enabled: aws.Bool(true)}}); err != nil {
			return err
		}
	}
	now := time.Now()
	var puts []map[string]ddbAV
	for c := range t.Customers {
		id := fmt.Sprintf("C-%03d", c)
		email := fmt.Sprintf("c%03d@shop.example", c)
		puts = append(puts, map[string]ddbAV{"PK": s(appCustomer + id), "SK": s("PROFILE"), "name": s("Customer " + id), "email": s(email),
			appIndexPK: s("EMAIL#" + email), appIndexSK: s(appCustomer + id)})
	}
	for o := range t.Orders {
		puts = append(puts, a.order(fmt.Sprintf("C-%03d", a.r.IntN(t.Customers)), fmt.Sprintf("O-%05d", o), pick(a.r, appStatuses), now))
	}
	for batch := range slices.Chunk(puts, 25) {
		reqs := map[string][]ddbtypes.WriteRequest{}
		for _, it := range batch {
			reqs[x.table] = append(reqs[x.table], ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: it}})
		}
		for len(reqs) > 0 {
			out, err := x.admin.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: reqs})
			if err != nil {
				return fmt.Errorf("filling the application's table: %w", err)
			}
			reqs = out.UnprocessedItems
		}
	}
	for _, it := range puts {
		k := appKey(it["PK"].(*ddbS).Value, it["SK"].(*ddbS).Value)
		a.items[k] = it
		if strings.HasPrefix(it["SK"].(*ddbS).Value, "ORDER#") {
			a.orders = append(a.orders, k)
		}
	}
	a.before, err = x.appShape(ctx)
	return err
}

// appShape reads the application's index and the table's TTL.
func (x *run) appShape(ctx context.Context) (appShape, error) {
	var sh appShape
	d, err := x.admin.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(x.table)})
	if err != nil {
		return sh, err
	}
	for _, g := range d.Table.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) != appIndex {
			continue
		}
		var keys []string
		for _, k := range g.KeySchema {
			keys = append(keys, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		sh.index = strings.Join(keys, ", ")
		if g.Projection != nil {
			sh.index += "; " + string(g.Projection.ProjectionType) + " " + strings.Join(g.Projection.NonKeyAttributes, ",")
		}
	}
	ttl, err := x.admin.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(x.table)})
	if err != nil {
		return sh, err
	}
	sh.ttl = string(ddbtypes.TimeToLiveStatusDisabled)
	if d := ttl.TimeToLiveDescription; d != nil && d.TimeToLiveStatus != "" {
		sh.ttl = string(d.TimeToLiveStatus)
		if d.AttributeName != nil {
			sh.ttl += " " + aws.ToString(d.AttributeName)
		}
	}
	return sh, nil
}

// adoptApp adopts the application's table as a team would (the daemon's
// `tables adopt`: tables.Plan, tables.Adopt, the settings recorded) and
// returns the store every host uses: read back from the table's record,
// as a host reads it at start. A plan with the defaults that is not
// blocked is a violation (AdoptShared); the team then adopts with it, as
// it was told the table fits.
func (x *run) adoptApp(ctx context.Context) (inbox.Store, error) {
	a := x.app
	first, err := tables.Plan(ctx, x.admin, tables.AdoptConfig{Name: x.table})
	if err != nil {
		return inbox.Store{}, fmt.Errorf("planning the adoption with the defaults: %w", err)
	}
	layout := first.Proposed
	var blocked []string
	for _, b := range first.Blockers {
		blocked = append(blocked, b.Subject)
	}
	if !slices.Contains(blocked, "index "+appIndex) {
		a.failed = append(a.failed, Violation{Invariant: AdoptShared, Detail: fmt.Sprintf("tables.Plan with the default layout did not block the application's index %s (blockers: %v): the inbox records would enter it",
			appIndex, blocked)})
	}
	if len(first.Blockers) == 0 {
		layout = first.Layout
	}
	plan, err := tables.Plan(ctx, x.admin, tables.AdoptConfig{Name: x.table, Layout: layout})
	if err != nil {
		return inbox.Store{}, fmt.Errorf("planning the adoption with the proposed layout: %w", err)
	}
	if err := tables.Adopt(ctx, x.admin, plan, tables.AdoptOptions{Wait: time.Minute, PollInterval: 200 * time.Millisecond}); err != nil {
		return inbox.Store{}, fmt.Errorf("adopting with the layout the blocked plan proposed: %w", err)
	}
	if err := inbox.RecordSettings(ctx, x.admin, inbox.Store{Table: x.table, Layout: plan.Layout}, "ddbworker-dev-explore"); err != nil {
		return inbox.Store{}, err
	}
	rec, ok, err := inbox.ReadRecorded(ctx, x.admin, inbox.Store{Table: x.table})
	switch {
	case err != nil:
		return inbox.Store{}, err
	case !ok || !rec.HasLayout():
		return inbox.Store{}, errors.New("adopted, but the table records no layout")
	}
	a.layout = rec.Store.Layout
	var changes []string
	for _, c := range plan.Changes {
		changes = append(changes, string(c.Kind)+" "+c.Target)
	}
	a.adopted = fmt.Sprintf("defaults blocked (%s); adopted with %s: %s; layout recorded",
		strings.Join(blocked, ", "), layoutShort(a.layout), strings.Join(changes, ", "))
	return rec.Store, nil
}

func layoutShort(l tables.Layout) string {
	return fmt.Sprintf("%s(%s,%s) %s(%s,%s) TTL %s", l.AggregateIndex, l.AggregatePK, l.AggregateSK, l.AttentionIndex, l.AttentionPK, l.AttentionSK, l.TTL)
}

// appTraffic is the application at work until stop closes: it moves
// orders along (status and GSI1 keys), places new ones and changes
// customers' emails, with its own client (no faults: the application is
// not ddbworker), and keeps what it wrote.
func (x *run) appTraffic(stop <-chan struct{}) {
	a := x.app
	tick := time.NewTicker(a.t.Every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		x.appWrite()
	}
}

// appWrite makes one write of the application's.
func (x *run) appWrite() {
	a := x.app
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	switch c := a.r.IntN(10); {
	case c < 7: // an order moves along: its status and its GSI1 keys
		k := a.orders[a.r.IntN(len(a.orders))]
		it := a.items[k]
		st := pick(a.r, appStatuses)
		x.appUpdate(k, map[string]ddbAV{"status": s(st), appIndexPK: s("STATUS#" + st),
			appIndexSK: s("ORDER#" + now.UTC().Format(time.RFC3339Nano) + "#" + it["orderId"].(*ddbS).Value), "updatedAt": n(now.UnixMilli())})
	case c < 9: // a new order
		it := a.order(fmt.Sprintf("C-%03d", a.r.IntN(a.t.Customers)), fmt.Sprintf("O-9%04d", a.writes), pick(a.r, appStatuses), now)
		k := appKey(it["PK"].(*ddbS).Value, it["SK"].(*ddbS).Value)
		cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("PK"))).Build()
		if err == nil {
			_, err = x.admin.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(x.table), Item: it,
				ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names()})
		}
		a.wrote(k, it, err, "PutItem")
		if err == nil {
			a.orders = append(a.orders, k)
		}
	default: // a customer changes their email: the GSI1 key follows
		k := appKey(appCustomer+fmt.Sprintf("C-%03d", a.r.IntN(a.t.Customers)), "PROFILE")
		email := fmt.Sprintf("c%d-%d@shop.example", a.r.IntN(1000), a.writes)
		x.appUpdate(k, map[string]ddbAV{"email": s(email), appIndexPK: s("EMAIL#" + email)})
	}
	a.writes++
}

// appUpdate sets attributes of one of the application's items.
func (x *run) appUpdate(k string, set map[string]ddbAV) {
	var u expression.UpdateBuilder
	for _, name := range slices.Sorted(maps.Keys(set)) {
		u = u.Set(expression.Name(name), expression.Value(set[name]))
	}
	expr, err := expression.NewBuilder().WithUpdate(u).WithCondition(expression.AttributeExists(expression.Name("PK"))).Build()
	if err == nil {
		pk, sk, _ := strings.Cut(k, "|")
		_, err = x.admin.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(x.table),
			Key: map[string]ddbAV{"PK": s(pk), "SK": s(sk)}, UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
	}
	it := maps.Clone(x.app.items[k])
	maps.Copy(it, set)
	x.app.wrote(k, it, err, "UpdateItem")
}

// wrote keeps what a write of the application's left (held: a.mu): the
// item as written, or, when the write failed, a violation — the
// application's own writes must succeed on an adopted table — and the key
// left out of the comparison (a failed call may still have applied).
func (a *appState) wrote(k string, it map[string]ddbAV, err error, call string) {
	if err == nil {
		a.items[k] = it
		return
	}
	a.unsure[k] = true
	if len(a.failed) < 10 {
		a.failed = append(a.failed, Violation{Invariant: AppWriteFailed, Detail: fmt.Sprintf("the application's %s of %s failed: %v", call, k, err)})
	}
}

// checkApp reads the application's items, its index and the table's TTL
// (the hosts and the application stopped) and returns what adoption or
// the workers changed of them.
func (x *run) checkApp(ctx context.Context) ([]Violation, error) {
	a := x.app
	a.mu.Lock()
	defer a.mu.Unlock()
	vs := slices.Clone(a.failed)
	add := func(inv Invariant, format string, args ...any) {
		vs = append(vs, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	// Every item of the application's, as it last wrote it, attribute by
	// attribute; none it did not write.
	seen := map[string]bool{}
	p := dynamodb.NewScanPaginator(x.admin, &dynamodb.ScanInput{TableName: aws.String(x.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, got := range page.Items {
			pk, _ := got["PK"].(*ddbS)
			sk, _ := got["SK"].(*ddbS)
			if pk == nil || sk == nil || !strings.HasPrefix(pk.Value, appCustomer) {
				continue
			}
			k := appKey(pk.Value, sk.Value)
			seen[k] = true
			want, ok := a.items[k]
			switch {
			case a.unsure[k]:
			case !ok:
				add(AppItemChanged, "%s is under the application's keys, and the application never wrote it: %v", k, slices.Sorted(maps.Keys(got)))
			default:
				if diff := attrDiff(want, got); diff != "" {
					add(AppItemChanged, "%s is not as the application last wrote it: %s", k, diff)
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.items)) {
		if !seen[k] && !a.unsure[k] {
			add(AppItemChanged, "%s, written by the application, is gone", k)
		}
	}
	// The application's index holds the application's items only.
	entered := 0
	ip := dynamodb.NewScanPaginator(x.admin, &dynamodb.ScanInput{TableName: aws.String(x.table), IndexName: aws.String(appIndex)})
	for ip.HasMorePages() {
		page, err := ip.NextPage(ctx)
		if err != nil {
			add(AppIndexChanged, "scanning the application's index %s: %v", appIndex, err)
			break
		}
		for _, got := range page.Items {
			if pk, _ := got["PK"].(*ddbS); pk != nil && strings.HasPrefix(pk.Value, appCustomer) {
				continue
			}
			if entered++; entered <= 3 {
				add(AppIndexEntered, "the application's index %s holds %s/%s (%s %s): not an item of the application's",
					appIndex, showAV(got["PK"]), showAV(got["SK"]), appIndexPK, showAV(got[appIndexPK]))
			}
		}
	}
	cp := dynamodb.NewScanPaginator(x.admin, &dynamodb.ScanInput{TableName: aws.String(x.table), IndexName: aws.String(a.layout.AggregateIndex), Select: ddbtypes.SelectCount})
	for cp.HasMorePages() {
		page, err := cp.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		a.inAggregate += int(page.Count)
	}
	if entered > 3 {
		add(AppIndexEntered, "%d items in all in the application's index %s are not the application's", entered, appIndex)
	}
	// Its key schema and projection, and the table's TTL.
	after, err := x.appShape(ctx)
	if err != nil {
		return nil, err
	}
	if after.index != a.before.index {
		add(AppIndexChanged, "the application's index %s was %q before adoption and is %q", appIndex, a.before.index, after.index)
	}
	// TTL off before: adoption may enable it on the layout's own
	// attribute, which no item of the application's carries.
	ownTTL := a.before.ttl == string(ddbtypes.TimeToLiveStatusDisabled) && strings.HasPrefix(a.layout.TTL, "ddbworker") &&
		after.ttl == string(ddbtypes.TimeToLiveStatusEnabled)+" "+a.layout.TTL
	if after.ttl != a.before.ttl && !ownTTL {
		add(AppIndexChanged, "the table's TTL was %q before adoption and is %q", a.before.ttl, after.ttl)
	}
	if ownTTL {
		for _, k := range slices.Sorted(maps.Keys(a.items)) {
			if _, carries := a.items[k][a.layout.TTL]; carries {
				add(AppIndexChanged, "TTL was enabled on %s, which the application's %s carries", a.layout.TTL, k)
				break
			}
		}
	}
	return vs, nil
}

// attrDiff names the attributes of got that differ from want, "" when
// none does.
func attrDiff(want, got map[string]ddbAV) string {
	names := map[string]bool{}
	for k := range want {
		names[k] = true
	}
	for k := range got {
		names[k] = true
	}
	var d []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if w, g := showAV(want[name]), showAV(got[name]); w != g {
			d = append(d, fmt.Sprintf("%s %s, want %s", name, g, w))
		}
	}
	return strings.Join(d, "; ")
}

// Plants of the adopted variant.
const (
	// PlantAppItem changes one of the application's items behind its
	// back.
	PlantAppItem = "app-item"
	// PlantAppIndex writes an inbox-like record that carries the
	// application's index keys: it enters the application's index.
	PlantAppIndex = "app-index"
)

// plantApp makes an adopted-variant plant.
func (x *run) plantApp(ctx context.Context) error {
	a := x.app
	switch x.cfg.Plant {
	case PlantAppItem:
		k := a.orders[0]
		pk, sk, _ := strings.Cut(k, "|")
		expr, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("status"), expression.Value("TAMPERED"))).Build()
		if err != nil {
			return err
		}
		if _, err := x.admin.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(x.table), Key: map[string]ddbAV{"PK": s(pk), "SK": s(sk)},
			UpdateExpression: expr.Update(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}); err != nil {
			return err
		}
		x.progress("planted: the application's %s changed behind its back", k)
	case PlantAppIndex:
		if _, err := x.admin.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(x.table), Item: map[string]ddbAV{
			"PK": s("IDEMP#planted"), "SK": s("WORKER#" + TypeA), "status": s("COMPLETED"),
			appIndexPK: s("AGG#agg#planted"), appIndexSK: s("IDEMP#planted")}}); err != nil {
			return err
		}
		x.progress("planted: an inbox-like record in the application's index %s", appIndex)
	}
	return nil
}
