# Mirrors README.md; nothing requires just.

demo:
    go run ./ferry demo

test:
    go test ./...

lint:
    golangci-lint run ./...

bench:
    go test -run '^$' -bench . -benchmem ./...

# The release build (README "Release build"): static, its version the git tag of HEAD.
release:
    CGO_ENABLED=0 go build -buildvcs=true -trimpath -ldflags "-s -w" -o dist/ferry ./ferry

cross:
    GOOS=windows GOARCH=amd64 go build -o /dev/null ./...
    GOOS=darwin GOARCH=arm64 go build -o /dev/null ./...
    GOOS=linux GOARCH=amd64 go build -o /dev/null ./...
