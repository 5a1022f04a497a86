// Package demo is what the example programs under examples/ share, so
// that each of them holds only its pattern of the Azure Table design
// guide:
//
//   - Main, NewFlags and Parse: the program's wrapper and its command
//     line, a command and its arguments with flags before, between or
//     after them, the argument count checked against the command's;
//   - Host: the flags that say where the host is (-nats-url, -nats-creds,
//     -connection-string with the development account's string as its
//     default) and the connections made from them;
//   - Coded and WithStatus: the Azure SDK's error for a host's refusal,
//     read back into the host's code and the first line of its message;
//   - Account, Metrics and ReadOperatorToken: the connection string's
//     parts and the host's /metrics behind the operator token;
//   - Account.Sign: SharedKey signing for a raw request the Azure SDK
//     has no call for (a large value's upload and download);
//   - Department, Manager, Name and EmployeeID: the sample company the
//     employee examples hire from, the same in each;
//   - Quote and Columns: an OData string literal and the listings'
//     column writer.
//
// It is internal to the examples: a program of one's own would take these
// few lines from its own command-line and configuration code.
package demo
