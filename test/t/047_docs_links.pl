
# 047_docs_links.pl: every relative link of the documentation resolves.
# Reads README.md, docs/*.md, bench/README.md and test/pg/README.md as text
# (no server): each link [text](target) that is not a URL must name a file
# that exists, relative to the page, and an anchor (#...) must be the slug
# of a heading of that file, as GitHub makes it.  The README stays a front
# door: at most 300 lines.

use strict;
use warnings FATAL => 'all';

use FindBin;
use File::Basename qw(dirname);
use File::Spec;
use Test::More;

my $top = File::Spec->rel2abs("$FindBin::RealBin/../..");
my @pages = ("$top/README.md", glob("$top/docs/*.md"), "$top/bench/README.md",
	"$top/test/pg/README.md");
ok(scalar(@pages) >= 14, scalar(@pages) . ' pages of documentation');

sub slurp
{
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	local $/;
	return <$fh>;
}

# GitHub's anchor of a heading: lower case, without what is neither a word
# character, a space nor a hyphen, spaces made hyphens; repeats get -1, -2
sub anchors
{
	my ($text) = @_;
	my (%seen, %anchors);
	my $in_code = 0;
	for my $line (split /\n/, $text)
	{
		$in_code = !$in_code if $line =~ /^```/;
		next if $in_code;
		next unless $line =~ /^#{1,6}\s+(.*?)\s*#*\s*$/;
		my $slug = lc $1;
		$slug =~ s/`//g;
		$slug =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;
		$slug =~ s/[^\w\- ]//g;
		$slug =~ s/ /-/g;
		my $n = $seen{$slug}++;
		$anchors{ $n ? "$slug-$n" : $slug } = 1;
	}
	return \%anchors;
}

my (%anchor_cache, @broken, $links);
foreach my $page (@pages)
{
	my $text = slurp($page);
	my $rel = File::Spec->abs2rel($page, $top);
	# links outside code blocks and code spans
	my $prose = join("\n", grep { !/^```/ } split(/```.*?```/s, $text));
	$prose =~ s/`[^`\n]*`//g;
	while ($prose =~ /\[[^\]\n]*\]\(([^)\s]+)\)/g)
	{
		my $target = $1;
		next if $target =~ m{^(?:https?|mailto):};
		$links++;
		my ($file, $anchor) = split /#/, $target, 2;
		my $path = $file eq '' ? $page : File::Spec->rel2abs($file, dirname($page));
		if (!-e $path)
		{
			push @broken, "$rel: $target (no such file)";
			next;
		}
		next unless defined $anchor && $anchor ne '';
		next unless $path =~ /\.md$/;
		$anchor_cache{$path} //= anchors(slurp($path));
		push @broken, "$rel: $target (no such heading)" unless $anchor_cache{$path}{$anchor};
	}
}
cmp_ok($links, '>', 50, "$links relative links read");
is(join("\n", @broken), '', 'every relative link resolves');

my $lines = () = slurp("$top/README.md") =~ /\n/g;
cmp_ok($lines, '<=', 300, "README.md is a front door ($lines lines)");

done_testing();
