// Package fair shares a resource among tenants by deficit round robin
// (Shreedhar and Varghese, 1995): each tenant with work waiting has a queue
// and a deficit; a tenant's turn adds a quantum to its deficit, and it is
// served while the cost of its next item fits in the deficit. Over time
// every tenant with work waiting gets an equal share of cost, whatever
// the sizes of its items and however long its backlog, and a tenant that
// arrives waits at most one turn of each tenant ahead of it.
//
// The worker uses it twice: between its pollers and its processing slots
// (which received message starts next) and in front of its write budget
// (whose write is paced next). It is not safe for concurrent use: its
// owner locks.
package fair
